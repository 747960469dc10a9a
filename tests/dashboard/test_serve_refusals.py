"""Starting the dashboard: an address it cannot listen on is refused in one line before anything is served or
announced (``collapsewatch dash`` and ``python -m collapsewatch.dashboard`` alike); a port left only in TIME_WAIT
by a dashboard stopped a moment ago is not busy."""

from __future__ import annotations

import errno
import socket

import pytest
from typer.testing import CliRunner

from collapsewatch.cli import app as cli
from collapsewatch.dashboard.app import check_port, main
from tests.ports import free_port

NOT_HERE = "192.0.2.1"
"""TEST-NET-1 (RFC 5737): an address no machine of ours has, so binding it fails without a DNS look-up."""


def _leave_time_wait(port: int) -> None:
    """What a dashboard stopped with a browser's connection open leaves behind: the server (listening with
    SO_REUSEADDR, as Werkzeug does) closes the connection first, so its side of it waits in TIME_WAIT (~60 s)."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen()
        with socket.create_connection(("127.0.0.1", port)) as client:
            conn, _ = listener.accept()
            conn.close()  # the server's close comes first
            assert client.recv(1) == b""  # the client has read the server's FIN, then closes its side


def test_a_port_left_in_time_wait_by_a_stopped_dashboard_is_free():
    port = free_port()
    _leave_time_wait(port)
    with socket.socket() as plain, pytest.raises(OSError) as e:  # without SO_REUSEADDR the port looks busy ...
        plain.bind(("127.0.0.1", port))
    assert e.value.errno == errno.EADDRINUSE
    check_port("127.0.0.1", port)  # ... but the server binds with it, so the port is free: no refusal


@pytest.mark.parametrize(("args", "line"), [
    (["--port", "99999"], "error: --port 99999: a port is a number from 1 to 65535"),
    (["--port", "-5"], "error: --port -5: a port is a number from 1 to 65535"),
    # 0 ("any free port") is refused too: Dash would serve on 8050 while the banner said :0
    (["--port", "0"], "error: --port 0: a port is a number from 1 to 65535"),
    (["--host", NOT_HERE, "--port", "{port}"], f"error: cannot bind {NOT_HERE}:{{port}}: Cannot assign requested address"),
])
def test_dash_refuses_an_address_it_cannot_listen_on_in_one_line(synth_store, args, line):
    port = free_port()
    result = CliRunner().invoke(cli, ["dash", str(synth_store), *(a.format(port=port) for a in args)])
    assert result.exit_code == 1
    assert result.output.splitlines() == [line.format(port=port)]  # no traceback, no "dashboard on http://…" banner


def test_a_busy_port_is_refused_by_dash_and_python_m_alike(synth_store, capsys):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        busy = f"error: port {port} on 127.0.0.1 is already in use (another dashboard?): stop it or pass --port"
        result = CliRunner().invoke(cli, ["dash", str(synth_store), "--port", str(port)])
        assert (result.exit_code, result.output.splitlines()) == (1, [busy])
        with pytest.raises(SystemExit) as e:  # what `python -m collapsewatch.dashboard STORE --port P` runs
            main([str(synth_store), "--port", str(port)])
        assert e.value.code == busy  # Python prints it on stderr and exits with 1
        with pytest.raises(SystemExit) as e:
            main([str(synth_store), "--host", NOT_HERE, "--port", str(port)])
        assert e.value.code == f"error: cannot bind {NOT_HERE}:{port}: Cannot assign requested address"
    assert capsys.readouterr().out == ""  # nothing announced before the refusals


def test_ctrl_c_while_waiting_for_a_store_ends_without_a_traceback(tmp_path):
    # `python -m collapsewatch.dashboard MISSING` waits for a run to create the store; Ctrl-C there (SIGINT) ended in a
    # KeyboardInterrupt traceback. Now: exit 130 (128 + SIGINT), nothing but the waiting line printed
    import signal
    import subprocess
    import sys

    from tests.conftest import child_env

    proc = subprocess.Popen([sys.executable, "-m", "collapsewatch.dashboard", str(tmp_path / "missing"), "--port",
                             str(free_port())], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=child_env(PYTHONUNBUFFERED="1"))
    try:
        first = proc.stdout.readline()  # printed once the port check passed and the wait began
        assert "does not exist" in first and "waiting" in first, first
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Traceback" not in rest, rest
