"""The kept process of ``collapsewatch sql`` (``collapsewatch/kept.py``): a real keeper on a real Unix socket, the
real CLI in a new process on each side.

What must hold: the command run by a warm process answers as a command run in its own process would (rows on the
caller's stdout, the refusal on its stderr, the same exit status, paths relative to the caller's folder); each warm
process runs one command and the keeper starts the next; a command with no keeper runs in its own process and
leaves one behind; a keeper with nothing to do exits and takes its socket with it; nothing is kept in a folder
others may open; another configuration or changed code gets another socket.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from collapsewatch import kept
from tests.conftest import child_env


@pytest.fixture
def runtime():
    # a short path of its own (a socket's path holds at most 108 bytes; pytest's tmp_path can be longer)
    folder = Path(tempfile.mkdtemp(prefix="cwk-", dir="/tmp"))
    yield folder
    for line in _processes(str(folder)):  # a keeper a test left (one started by a command): end it
        os.kill(line, 15)
    shutil.rmtree(folder, ignore_errors=True)


def _env(runtime: Path, **extra: str) -> dict[str, str]:
    return child_env(COLLAPSEWATCH_RUNTIME_DIR=str(runtime), COLLAPSEWATCH_KEEP_S=extra.pop("keep_s", "60"), **extra)


def _processes(needle: str) -> list[int]:
    """Pids of this user's processes whose command line mentions ``needle``."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if needle in cmdline and "collapsewatch.kept" in cmdline:
            out.append(int(pid))
    return out


def _children(pid: int) -> set[int]:
    kids: set[int] = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        kids |= {int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()}
    return kids


def _socket_of(env: dict[str, str]) -> Path:
    code = "from collapsewatch import kept; print(kept.socket_path())"
    return Path(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                               check=True).stdout.strip())


def _wait(predicate, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def _cli(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "collapsewatch", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def store(tmp_path):
    from collapsewatch.store.writer import init_store

    init_store(tmp_path / "store")
    return tmp_path / "store"


@pytest.fixture
def keeper(runtime):
    env = _env(runtime)
    path = _socket_of(env)
    proc = subprocess.Popen([sys.executable, "-m", "collapsewatch.kept", "serve", str(path)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait(lambda: path.exists() and len(_children(proc.pid)) == 1)
    yield proc, path, env
    proc.terminate()
    proc.wait(timeout=30)


def test_a_warm_process_runs_the_command_as_its_own_process_would(keeper, store) -> None:
    proc, path, env = keeper
    first = _children(proc.pid)
    out = _cli(env, "sql", store.name, "SELECT 41 + 1 AS x", cwd=store.parent)  # a path relative to the caller
    assert out.returncode == 0, out.stderr
    assert "│ 42 │" in out.stdout
    # the warm process took it (it exits after its one command) and the keeper started the next one
    _wait(lambda: (kids := _children(proc.pid)) and not kids & first)
    second = _children(proc.pid)
    refused = _cli(env, "sql", str(store), "DROP TABLE runs")
    assert refused.returncode == 1 and refused.stdout == ""
    assert "refused: the store is read-only here" in refused.stderr
    assert _cli(env, "sql", str(store), "SELECT 1 AS a, 'b' AS c", "--csv").stdout == "a,c\n1,b\n"
    _wait(lambda: not _children(proc.pid) & second)  # each command had its own warm process
    # the same command in its own process (nothing kept) says the same
    alone = _cli({**env, "COLLAPSEWATCH_KEEP_S": "0"}, "sql", str(store), "DROP TABLE runs")
    assert (alone.returncode, alone.stdout, alone.stderr) == (refused.returncode, refused.stdout, refused.stderr)


def test_a_command_with_no_keeper_runs_here_and_leaves_one(runtime, store) -> None:
    env = _env(runtime)
    path = _socket_of(env)
    out = _cli(env, "sql", str(store), "SELECT 41 + 1 AS x")
    assert out.returncode == 0 and "│ 42 │" in out.stdout
    _wait(lambda: path.exists() and len(keepers := _processes(str(path))) == 1 and _children(keepers[0]))


def test_an_idle_keeper_exits_and_removes_its_socket(runtime) -> None:
    env = _env(runtime, keep_s="1")
    path = _socket_of(env)
    proc = subprocess.Popen([sys.executable, "-m", "collapsewatch.kept", "serve", str(path)], env=env)
    _wait(lambda: path.exists() and _children(proc.pid))
    warm = _children(proc.pid)
    assert proc.wait(timeout=60) == 0
    assert not path.exists() and not any(Path(f"/proc/{pid}").exists() for pid in warm)  # its warm process too


def test_a_socket_left_by_a_killed_keeper_is_taken_over(runtime, store) -> None:
    env = _env(runtime)
    path = _socket_of(env)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))  # a socket file nobody listens on (its keeper was killed)
    dead.close()
    out = _cli(env, "sql", str(store), "SELECT 41 + 1 AS x")
    assert out.returncode == 0 and "│ 42 │" in out.stdout  # ran in its own process
    _wait(lambda: len(_processes(str(path))) == 1)
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    _wait(lambda: probe.connect_ex(str(path)) == 0)  # a new keeper listens on the same name
    probe.close()


def test_nothing_is_kept_in_a_folder_others_may_open(runtime, monkeypatch) -> None:
    monkeypatch.setenv("COLLAPSEWATCH_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("COLLAPSEWATCH_KEEP_S", "60")
    os.chmod(runtime, 0o700)
    assert kept.runtime_dir() == runtime and kept.socket_path() is not None
    os.chmod(runtime, 0o755)
    assert kept.runtime_dir() is None and kept.socket_path() is None and kept.run(["sql", "x", "select 1"]) is None
    os.chmod(runtime, 0o700)
    monkeypatch.setenv("COLLAPSEWATCH_KEEP_S", "0")  # keep nothing
    assert kept.socket_path() is None


def test_another_setting_or_changed_code_gets_another_keeper(tmp_path, monkeypatch) -> None:
    env = {"COLLAPSEWATCH_CACHE": "/a", "TERM": "xterm", "AWS_ENDPOINT_URL": "http://x"}
    base = kept.digest(env)
    assert kept.digest({**env, "TERM": "dumb"}) == base  # read by the command, set from the caller's environment
    assert kept.digest({**env, "COLLAPSEWATCH_CACHE": "/b"}) != base  # read while a process starts
    assert kept.digest({**env, "AWS_ENDPOINT_URL": "http://y"}) != base
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text("x = 1\n")
    monkeypatch.setattr(kept, "_PACKAGE", package)
    before = kept.digest(env)
    os.utime(package / "m.py", ns=(1, 1))
    assert kept.digest(env) != before  # edited code: a keeper of the old code is not used
