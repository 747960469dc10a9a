"""Who may write a run: one live Monitor per (store, run, rank), and no silent reuse of a run's name.

Two writers on one rank of one run would collide on every step row and double every sequence row, and a new run
under an old name would merge into it; neither would say a word. So a Monitor

* claims ``<store>/<run>/.writer-r<rank>.lock`` (host, pid) before it writes: a lock whose process is alive on this
  host refuses the second writer with :class:`RunInUseError`; a lock left by a dead process (SIGKILL, OOM) is
  stale and taken over. A lock from another host cannot be checked from here: it is refused, and the message names
  the file to delete once that process is known to be gone;
* refuses a run this rank already wrote (its run row or a segment exists) with :class:`RunExistsError` unless it
  was asked to resume, naming ``--resume`` / ``resume=True`` and a fresh name;
* refuses a resume that would start over (:func:`refuse_restart`): a trainer at step 0 with no checkpoint loaded
  would replace every stored step instead of continuing after them.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .store.restart import last_step


class RunInUseError(ValueError):
    """Another live process writes this rank of this run (a ValueError: the CLI prints one line)."""


class RunExistsError(ValueError):
    """The run name is taken and the caller did not ask to resume it (a ValueError: the CLI prints one line)."""


def lock_path(root: Path, run: str, rank: int) -> Path:
    return root / run / f".writer-r{rank}.lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: existence check only
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


@dataclass
class RunLock:
    """The claim of one (run, rank); ``release`` removes the file if it is still this process's."""

    path: Path
    token: str

    @classmethod
    def claim(cls, root: Path, run: str, rank: int) -> RunLock:
        path = lock_path(root, run, rank)
        token = uuid.uuid4().hex
        me = {"host": socket.gethostname(), "pid": os.getpid(), "token": token,
              "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        tmp = path.parent / f".{path.name}.{token[:8]}.tmp"
        tmp.write_text(json.dumps(me))
        try:
            for _ in range(3):
                try:
                    os.link(tmp, path)  # atomic: the lock appears whole, or the call fails because one exists
                    return cls(path, token)
                except FileExistsError:
                    _refuse_unless_stale(path, run, rank)
            raise RunInUseError(f"run {run!r} rank {rank}: could not take the lock {str(path)!r}")
        finally:
            tmp.unlink(missing_ok=True)

    def release(self) -> None:
        try:
            if json.loads(self.path.read_text()).get("token") == self.token:
                self.path.unlink()
        except (OSError, ValueError):
            pass  # gone or replaced: nothing of ours to remove


def _refuse_unless_stale(path: Path, run: str, rank: int) -> None:
    """Raise RunInUseError if the lock's owner may be alive; otherwise remove the stale lock."""
    try:
        owner = json.loads(path.read_text())
        host, pid = str(owner["host"]), int(owner["pid"])
    except FileNotFoundError:
        return  # released meanwhile: try again
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RunInUseError(f"run {run!r} rank {rank}: unreadable writer lock {str(path)!r} ({e}); delete it if "
                            "no process writes this run") from e
    if host != socket.gethostname():
        raise RunInUseError(f"run {run!r} rank {rank} is being written by pid {pid} on host {host!r} (lock "
                            f"{str(path)!r}); if that process is gone, delete the lock file and retry")
    if _alive(pid):
        who = "this process (another Monitor)" if pid == os.getpid() else f"process {pid}"
        raise RunInUseError(f"run {run!r} rank {rank} is being written by {who} since {owner.get('since')}: two "
                            "writers on one rank would collide; close the other Monitor or use another run name")
    # its process is gone (killed): the lock is stale. Known gap: two processes taking over the same stale lock at
    # the same instant may both succeed (each removes what it read as stale); a restart race, not a normal start
    path.unlink(missing_ok=True)


def rank_has_rows(root: Path, run: str, rank: int) -> bool:
    """True when this rank already wrote into the run (its run row, or any segment of it)."""
    folder = root / run
    return (folder / "runs" / f"r{rank}.parquet").exists() or any(folder.glob(f"*/r{rank}-*.parquet"))


def refuse_reuse(root: Path, run: str, rank: int, store: str | None = None) -> None:
    """Raise RunExistsError when ``run`` already holds rows of ``rank`` (a new run must not merge into it).
    ``store`` names the store in the message when ``root`` is an object store's local spool."""
    if not rank_has_rows(root, run, rank):
        return
    n = 2
    while (root / f"{run}-{n}").exists():
        n += 1
    raise RunExistsError(f"run {run!r} already exists in store {store or str(root)!r}: to continue it pass --resume "
                         f"(Monitor(..., resume=True), watch(..., resume=True)); to start a new run choose a fresh name, e.g. {run}-{n}")


def refuse_restart(store: str | os.PathLike, run: str, rank: int, start_step: int, caller: str) -> None:
    """Raise RunExistsError when a resumed ``run`` would start over: the trainer begins at ``start_step`` 0 (no
    checkpoint loaded) while this rank already stored steps, which its steps 1, 2 … would replace. A start after a
    checkpoint (``start_step`` > 0) continues: the steps it replays replace the abandoned ones (``store.restart``)."""
    if start_step > 0 or (last := last_step(store, run, rank)) is None:
        return
    raise RunExistsError(f"{caller}: run {run!r} in store {str(store)!r} holds steps up to {last} (rank {rank}), but "
                         "the trainer starts at step 0 with no checkpoint loaded and would write them over; continue "
                         "it with trainer.train(resume_from_checkpoint=True) (or a checkpoint's path), or record a "
                         "new run under a fresh name")
