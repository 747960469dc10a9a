"""`make demo`'s main job end to end: `collapsewatch demo` serves the dashboard, trains under it, keeps serving."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from collapsewatch import connect
from collapsewatch.demo import SAMPLE_RUNS
from tests.ports import free_port


def _as_a_background_job() -> None:
    """Started with SIGINT ignored, as a background job (``make demo &`` without job control) or a child of a process
    that ignores it inherits it: Ctrl-C still stops the demo (cli_common.ctrl_c_ends_it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_demo_serves_the_dashboard_while_it_trains_then_keeps_serving(tmp_path):
    port, store = free_port(), tmp_path / "demo"
    proc = subprocess.Popen([sys.executable, "-m", "collapsewatch", "demo", "--store", str(store), "--steps", "2",
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            preexec_fn=_as_a_background_job)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            lines.append(proc.stdout.readline())
            if lines[-1].startswith("dashboard still at"):
                break
        assert lines and lines[-1].startswith("dashboard still at"), "".join(lines)
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/run/demo-grpo", timeout=10).read().decode()
        assert "collapsewatch" in page.lower()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()  # never leave a demo behind; the failure below says Ctrl-C did not stop it
            proc.wait()
    assert proc.returncode == 0, "Ctrl-C did not stop the demo"
    out = "".join(lines)
    assert out.index(f"dashboard: http://127.0.0.1:{port}/run/demo-grpo") < out.index("training demo-grpo")
    assert out.index("training demo-grpo") < out.index("done: 2 steps")  # the dashboard was up during training
    con = connect(store)
    assert con.execute("SELECT count(*) FROM steps WHERE run = 'demo-grpo'").fetchone() == (2,)
    samples = {p.name for p in SAMPLE_RUNS.iterdir() if (p / "runs").is_dir() and not p.name.startswith("_")}
    assert samples and samples <= {r for (r,) in con.execute("SELECT run FROM runs").fetchall()}
    with socket.socket() as s:  # the dashboard process is gone with the demo: its port is free again
        s.bind(("127.0.0.1", port))


def test_sigterm_stops_the_demo_and_its_dashboard_child(tmp_path):
    port, store = free_port(), tmp_path / "demo"
    proc = subprocess.Popen([sys.executable, "-m", "collapsewatch", "demo", "--store", str(store), "--steps", "50",
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    try:
        while proc.poll() is None and not (lines and lines[-1].startswith("training ")):
            lines.append(proc.stdout.readline())
        out = "".join(lines)
        # the demo says where to look before training starts
        assert f"http://127.0.0.1:{port}/run/grpo-collapse" in out and "/compare?runs=grpo-healthy" in out, out
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    with socket.socket() as s:  # no orphaned dashboard holds the port
        s.bind(("127.0.0.1", port))


def test_a_busy_port_is_refused_before_starting_a_dashboard(tmp_path):
    import pytest

    from collapsewatch.demo import start_dashboard

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        with pytest.raises(RuntimeError, match="already in use"):
            start_dashboard(tmp_path, held.getsockname()[1])
    # the demo refuses as `collapsewatch dash` does (one check, dashboard.app.check_port): a port outside 1–65535,
    # and a host that is no address of this machine (192.0.2.1, TEST-NET-1) with the system's reason — it called
    # that a busy port before
    with pytest.raises(ValueError, match="a port is a number from 1 to 65535"):
        start_dashboard(tmp_path, 99999)
    with pytest.raises(RuntimeError, match="cannot bind 192.0.2.1:"):
        start_dashboard(tmp_path, 8050, host="192.0.2.1")


def test_a_busy_port_is_refused_before_the_store_is_touched(tmp_path):
    from typer.testing import CliRunner

    from collapsewatch.cli import app

    store = tmp_path / "demo"
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        res = CliRunner().invoke(app, ["demo", "--store", str(store), "--steps", "2",
                                       "--port", str(held.getsockname()[1])])
    assert res.exit_code == 1 and "already in use" in res.output and "Traceback" not in res.output
    assert "sample runs copied" not in res.output and not store.exists()  # nothing copied, nothing left behind


def test_the_closing_hint_names_the_command_as_it_was_started(tmp_path, monkeypatch):
    from collapsewatch.demo import this_command

    # started as README says, without an activated venv: .venv/bin/collapsewatch, and PATH has no collapsewatch
    script = tmp_path / ".venv" / "bin" / "collapsewatch"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "elsewhere"))
    monkeypatch.setattr(sys, "argv", [".venv/bin/collapsewatch", "demo"])
    assert this_command() == ".venv/bin/collapsewatch"
    # the venv activated: PATH finds this very script, so the bare name works
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(script.parent))
    assert this_command() == "collapsewatch"
    # python -m collapsewatch: this interpreter
    monkeypatch.setattr(sys, "argv", ["/x/collapsewatch/__main__.py", "demo"])
    assert this_command() == f"{sys.executable} -m collapsewatch"


def test_the_log_of_a_started_dashboard_can_be_read_back():
    # a failing page's test prints the server's traceback from it: here, the request line of a page it served
    from collapsewatch.demo import dashboard_log, start_dashboard

    port = free_port()
    server = start_dashboard(SAMPLE_RUNS, port)
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30).read()
        assert '"GET / HTTP/1.1" 200' in dashboard_log(server)
        assert dashboard_log(server, 10) == dashboard_log(server)[-10:]
        # problems only: a request it did not answer with 2xx / 3xx stays, the pages it served go
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/assets/nope.css", timeout=30)
        problems = dashboard_log(server, problems=True)
        assert "GET /assets/nope.css HTTP/1.1" in problems and '" 404 -' in problems  # werkzeug colours it
        assert '"GET / HTTP/1.1"' not in problems
    finally:
        server.terminate()
        server.wait(timeout=30)
    other = subprocess.Popen([sys.executable, "-c", "pass"])
    other.wait()
    assert dashboard_log(other) == ""  # not one start_dashboard started
