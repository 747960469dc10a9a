"""Where a person's SQL runs: a child process with a hard memory and time limit, a few at a time.

DuckDB's ``memory_limit`` bounds what its buffer manager tracks; list and string builders and a materialised result
are not tracked (``SELECT list(range(100000000))`` grew a process to 7 GB under a 1 GB limit, and its interrupt came
only when the list was built). So each user query (``sandbox.run_user_sql``: the CLI's ``sql`` and the dashboard's
SQL page) runs in a fresh child process (``python -m collapsewatch.store.sqlproc``) that

* caps its own address space (``RLIMIT_AS`` = ``Limits.process_bytes``) before it opens DuckDB: an allocation
  beyond it fails inside DuckDB or Arrow, and the query ends with one line, however the memory was asked for;
* runs DuckDB with ``threads`` = 2 and glibc's ``MALLOC_ARENA_MAX`` = 2, so the interpreter's own reservations stay
  a fixed part of that address space on any machine;
* interrupts its query at the deadline (``con.interrupt()`` from a timer) and is killed by the parent
  ``GRACE_S`` seconds after it, if it has not ended by then (a builder that never checks for the interrupt);
* sends back at most ``max_rows`` rows and ``max_bytes`` bytes as an Arrow IPC stream, cut in the child.

The parent runs at most ``MAX_CONCURRENT`` children at once (a process-wide semaphore; a query that waits past its
deadline for a slot is refused), so a server's user queries hold at most ``MAX_CONCURRENT × process_bytes`` of
memory besides its own, whatever runs in parallel. The deadline counts from the call (waiting and start-up
included). The child reads the store's good segments as Arrow datasets on a connection without file access
(``sandbox``: barrier 2).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa

from .sandbox import Limits

MAX_CONCURRENT = 2
GRACE_S = 1.5  # after the deadline, the parent kills a child whose query did not end at its interrupt
CUT_KEY = b"collapsewatch.cut"
_slots = threading.BoundedSemaphore(MAX_CONCURRENT)


def run(root: Path, statement: str, limits: Limits) -> tuple[pa.Table, bool]:
    """Run one checked SELECT (``sandbox.check_select_only``) over the store at ``root`` in a child process; returns
    (rows, whether they were cut at a limit). ValueError with one line for a failed, interrupted or oversized
    query."""
    deadline = time.monotonic() + limits.timeout_s
    if not _slots.acquire(timeout=limits.timeout_s):
        raise ValueError(f"query refused: {MAX_CONCURRENT} queries were running for the whole {limits.timeout_s:g} s "
                         "limit; try again")
    try:
        request = {"root": str(root), "sql": statement, "limits": limits.__dict__,
                   "deadline_s": deadline - time.monotonic()}
        proc = _take()
        try:
            out, err = proc.communicate(json.dumps(request).encode(), timeout=max(0.0, deadline - time.monotonic())
                                        + GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise ValueError(_interrupted(limits)) from None
    finally:
        _slots.release()
    return _answer(proc.returncode, out, err, limits)


_spare: subprocess.Popen | None = None
_spare_lock = threading.Lock()


def _spawn() -> subprocess.Popen:
    env = dict(os.environ, MALLOC_ARENA_MAX="2", PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "collapsewatch.store.sqlproc"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def _take() -> subprocess.Popen:
    """A child for this query: the spare one started after the previous query (its imports done meanwhile, about a
    second and a half here), and a new spare for the next. A spare left when this process exits reads end-of-file
    and exits."""
    global _spare
    with _spare_lock:
        proc = _spare if _spare is not None and _spare.poll() is None else _spawn()
        _spare = _spawn()
    return proc


def _interrupted(limits: Limits) -> str:
    return f"query interrupted: it ran longer than the {limits.timeout_s:g} s limit"


def _answer(code: int, out: bytes, err: bytes, limits: Limits) -> tuple[pa.Table, bool]:
    if code == 0 and out[:1] == b"R":
        table = pa.ipc.open_stream(out[1:]).read_all()
        return table.replace_schema_metadata(None), (table.schema.metadata or {}).get(CUT_KEY) == b"1"
    if out[:1] == b"E":
        raise ValueError(json.loads(out[1:].decode())["message"])
    tail = err.decode(errors="replace").strip().splitlines()
    if code < 0 or any("MemoryError" in line or "bad_alloc" in line for line in tail[-3:]):
        raise ValueError(f"query failed: it needed more than the {limits.process_bytes / 2**30:g} GiB a query may "
                         "use" + (f" (its process ended with signal {-code})" if code < 0 else ""))
    raise ValueError(f"query failed: {tail[-1][:200] if tail else f'its process exited with code {code}'}")


# ---- the child --------------------------------------------------------------------------------------------------


def _child(request: dict) -> tuple[pa.Table, bool]:
    from .sandbox import run_checked
    from .segments import read_until_stable

    limits = Limits(**request["limits"])
    deadline = time.monotonic() + request["deadline_s"]
    root = Path(request["root"])
    try:  # a segment compacted away between listing and read: run it again while the store keeps changing
        return read_until_stable(root, lambda: run_checked(root, request["sql"], limits,
                                                           max(0.0, deadline - time.monotonic())))
    except FileNotFoundError as e:
        raise ValueError(f"query failed: {str(e).splitlines()[0]}") from e


def main() -> None:
    """The child: cap the address space, answer one request from stdin on stdout (``R`` + Arrow IPC, or ``E`` +
    a JSON message)."""
    import resource

    from . import sandbox, views  # noqa: F401  (imported while waiting for the request: the spare is warm)

    data = sys.stdin.buffer.read()
    if not data:  # the parent exited without using this spare
        return
    request = json.loads(data.decode())
    cap = int(request["limits"]["process_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    try:
        table, cut = _child(request)
    except (ValueError, MemoryError) as e:
        message = str(e) if isinstance(e, ValueError) else "query failed: out of memory"
        if "Out of Memory" in message or isinstance(e, MemoryError):
            message = (f"query failed: it needed more than the {cap / 2**30:g} GiB a query may use "
                       f"(DuckDB's memory limit {request['limits']['memory']})")
        sys.stdout.buffer.write(b"E" + json.dumps({"message": message.splitlines()[0]}).encode())
        return
    table = table.replace_schema_metadata({CUT_KEY: b"1" if cut else b"0"})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    sys.stdout.buffer.write(b"R" + sink.getvalue().to_pybytes())


if __name__ == "__main__":
    main()
