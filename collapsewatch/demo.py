"""`collapsewatch demo` / `make demo`: a short real training run with the monitor, watched live on the dashboard.

The shipped sample runs (``SAMPLE_RUNS``: seven runs — healthy and collapsing GRPO, SAPO-search, LLDS, and the
lld drill under three objectives) are copied into the demo store next to the fresh run, so the dashboard has
something to compare against at once.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import weakref
from pathlib import Path
from typing import IO

_PACKAGED = Path(__file__).resolve().parent / "sample_runs"  # a wheel install (pyproject's package-dir)
SAMPLE_RUNS = _PACKAGED if _PACKAGED.is_dir() else Path(__file__).resolve().parents[1] / "sample_runs" / "store"
"""The shipped sample runs: inside the installed package, or the checkout's ``sample_runs/store``."""


def this_command() -> str:
    """The ``collapsewatch`` command as the user can type it again, for a hint: the bare name where PATH finds this
    very executable; else the path it was started by (``.venv/bin/collapsewatch``, README's form without an activated
    venv); else (``python -m collapsewatch``) this interpreter with ``-m collapsewatch``."""
    started = sys.argv[0]
    if Path(started).name == "collapsewatch":
        found = shutil.which("collapsewatch")
        if found is not None and Path(found).resolve() == Path(started).resolve():
            return "collapsewatch"
        return shlex.quote(started)
    return f"{shlex.quote(sys.executable)} -m collapsewatch"


def copy_sample_runs(store: Path) -> list[str]:
    """Copy each sample run folder into ``store`` (skipping ones already there)."""
    copied = []
    if not SAMPLE_RUNS.is_dir():
        return copied
    for run_dir in sorted(SAMPLE_RUNS.iterdir()):
        if run_dir.name.startswith(("_", ".")) or not (run_dir / "runs").is_dir():
            continue
        target = store / run_dir.name
        if not target.exists():
            shutil.copytree(run_dir, target, ignore=shutil.ignore_patterns("checkpoint", "*.duckdb"))
            copied.append(run_dir.name)
    return copied


_LOGS: weakref.WeakKeyDictionary[subprocess.Popen, IO[bytes]] = weakref.WeakKeyDictionary()
"""The log file of each dashboard :func:`start_dashboard` started (:func:`dashboard_log` reads it)."""


def dashboard_log(proc: subprocess.Popen, tail: int = 4000, problems: bool = False) -> str:
    """The last ``tail`` characters a dashboard started by :func:`start_dashboard` wrote (its requests and any
    traceback: what a caller shows when a page failed); with ``problems``, of its lines other than the requests it
    answered with 2xx or 3xx (a traceback written early stays in view however many pages were served after it); ''
    for a process it did not start."""
    log_file = _LOGS.get(proc)
    if log_file is None or log_file.closed:
        return ""
    fd = log_file.fileno()  # the child shares this file's offset: pread leaves it where the child writes
    size = os.fstat(fd).st_size
    start = 0 if problems else max(0, size - 4 * tail)  # UTF-8: at most 4 bytes a character
    text = os.pread(fd, size - start, start).decode(errors="replace")
    if problems:
        text = "".join(line for line in text.splitlines(keepends=True) if not _ANSWERED.search(line))
    return text[-tail:]


_ANSWERED = re.compile(r'HTTP/[\d.]+(?:\x1b\[0m)?" [23]\d\d ')
"""A request line of the server's log (werkzeug's, which colours the request of a status other than 200) that was
answered 2xx / 3xx."""


def start_dashboard(store: Path, port: int, host: str = "127.0.0.1", timeout: float = 60.0) -> subprocess.Popen:
    """Serve the dashboard of ``store`` in a child process (so training keeps this process's cores and GIL) and
    wait until it answers; raises RuntimeError with the server's last output if it does not. The server's log
    goes to an unnamed temporary file, never a pipe: a pipe nobody reads would fill up and block it.
    An address the server could not listen on is refused first, as ``collapsewatch dash`` refuses it (a busy port:
    a dashboard left over from an earlier demo would otherwise answer the readiness check and be taken for this
    one; a port outside 1–65535; a host not of this machine, with the system's reason)."""
    from .dashboard.app import check_port

    check_port(host, port)
    log_file = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "collapsewatch.dashboard", str(store), "--host", host,
                             "--port", str(port)], stdout=log_file, stderr=subprocess.STDOUT)
    _LOGS[proc] = log_file
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://{host}:{port}/", timeout=1)
            return proc
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"the dashboard did not start on {host}:{port}:\n{dashboard_log(proc, 1500)}") \
                    from None
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"the dashboard did not answer on {host}:{port} within {timeout:.0f} s")


WHERE_TO_LOOK = (
    ("a collapse to read", "/run/grpo-collapse", "events table on top, phases aligned with the charts"),
    ("healthy vs collapsing", "/compare?runs=grpo-healthy,grpo-collapse&align=collapse", "config diff below"),
    ("the tokens of a degenerate response", "/tokens/grpo-collapse?step=180&rank=entropy", ""),
)


def where_to_look(port: int) -> str:
    """The demo's pointers into the sample runs, one line each."""
    return "\n".join(f"  {what:36s} http://127.0.0.1:{port}{path}" + (f"  ({note})" if note else "")
                     for what, path, note in WHERE_TO_LOOK)


def _stop_on_sigterm() -> None:
    """SIGTERM ends the demo like Ctrl-C, so its dashboard child is stopped too (never left orphaned on its port)."""
    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def run_demo(store: Path, steps: int = 30, serve: bool = True, port: int = 8050) -> None:
    """Copy the sample runs into ``store``, serve the dashboard (live) and train ``demo-grpo`` with the monitor;
    the dashboard stays up after training until Ctrl-C."""
    if serve:  # a busy port is refused before anything is written or started (README)
        from .dashboard.app import check_port

        check_port("127.0.0.1", port)
    from .models.builtin import NOTES_ENV
    from .store.writer import ensure_schema
    from .trainer.config import load_config
    from .trainer.loop import train

    store = Path(store)
    store.mkdir(parents=True, exist_ok=True)
    ensure_schema(store)
    copied = copy_sample_runs(store)
    if copied:
        print(f"sample runs copied into {store}: {', '.join(copied)}")
    cfg = load_config(steps=steps, store=str(store), run="demo-grpo", objective="grpo")
    if (store / cfg.run_name).exists():
        shutil.rmtree(store / cfg.run_name)  # a fresh demo run each time
    _stop_on_sigterm()
    from .dashboard.waiting import NOTES_DIR

    notes = store / NOTES_DIR / f"{cfg.run_name}.txt"  # the model build's progress, for the waiting page
    notes.parent.mkdir(exist_ok=True)
    notes.write_text("")
    os.environ[NOTES_ENV] = str(notes)
    dash = start_dashboard(store, port) if serve else None
    try:
        if dash is not None:
            print(f"dashboard: http://127.0.0.1:{port}/run/{cfg.run_name}  (opens when the run starts, before its "
                  "first step, then follows it live)")
            print(where_to_look(port), flush=True)
        print(f"training {cfg.run_name}: {steps} steps of GRPO on the built-in tiny model (CPU) …")
        result = train(cfg)
        print(f"done: {result.steps} steps. Query it:  {this_command()} sql {shlex.quote(str(store))} \"select step, "
              f"reward_mean, ratio_p05_pos from steps where run = '{result.run}' order by step\"")
        if dash is not None:
            print(f"dashboard still at http://127.0.0.1:{port}  (Ctrl-C to stop)")
            dash.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if dash is not None and dash.poll() is None:
            dash.terminate()
            dash.wait(timeout=10)
