"""A kept process for the CLI's ``sql``: the command runs in a process that imported everything it needs before it
was asked, so ``collapsewatch sql STORE "…"`` costs an interpreter's start and a socket's round trip, not a second
of imports (Typer's argument coercion imports pydantic, the answer's decoder imports Arrow, the query's worker
imports DuckDB).

How it works:

* ``collapsewatch sql …`` (``launch.main``) connects to a Unix socket in this user's runtime folder
  (:func:`runtime_dir`: ``$COLLAPSEWATCH_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/collapsewatch``, else
  ``collapsewatch-<uid>`` in the temporary folder (``$TMPDIR``, ``/tmp``); used only where it is a folder of this user that nobody else may open, mode 0700).
  Where a kept process answers, the command's arguments, working folder and environment go to it with this
  process's stdin, stdout and stderr themselves (``SCM_RIGHTS``): the command prints to the same terminal or pipe as
  if it ran here, and its exit status comes back as this process's own. Ctrl+C is passed on to it.
* Where none answers, the command runs here as before, and when it is done a **keeper** starts in the background
  for the next one (``python -m collapsewatch.kept serve``, its own session, stdio on ``/dev/null``): it keeps one **warm** process
  waiting on the socket — the CLI, Typer's coercion, Arrow's decoder and a started SQL worker (``sqlproc.prestart``)
  imported — and starts the next warm one as soon as one takes a command. A warm process runs one command and exits:
  no state carries from one command to the next.
* The socket's name holds a digest of the interpreter, the package's files (path, size, mtime) and the variables a
  process reads while it starts (``COLLAPSEWATCH_*``, ``PYTHON*``, ``LANG``/``LC_*``, ``MALLOC_*``, ``LD_*``,
  ``AWS_*``): a changed install, edited code or another configuration gets its own keeper, never an old one. The
  other variables are the caller's, set in the warm process before the command runs.
* A keeper exits after ``$COLLAPSEWATCH_KEEP_S`` seconds (default 300) in which no command came, or when its socket
  was removed or replaced. ``COLLAPSEWATCH_KEEP_S=0`` keeps nothing: every command runs in its own process.

The query's own limits are the same either way: its worker is a child of the process that runs the command
(``store/sqlproc.py``), killed by it at the deadline.
"""

from __future__ import annotations

import hashlib
import os
import socket
import struct
import sys
from pathlib import Path

KEEP_ENV = "COLLAPSEWATCH_KEEP_S"
RUNTIME_ENV = "COLLAPSEWATCH_RUNTIME_DIR"
DEFAULT_KEEP_S = 300.0
HELLO_S = 5.0  # a command waits this long for a warm process to take it (one still importing), then runs here
DIGEST_PREFIXES = ("COLLAPSEWATCH_", "PYTHON", "LANG", "LC_", "MALLOC_", "LD_", "AWS_")
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux
_PACKAGE = Path(__file__).resolve().parent


def keep_seconds() -> float:
    """``$COLLAPSEWATCH_KEEP_S`` (seconds a keeper waits for a command; 0 keeps none), default 300."""
    raw = os.environ.get(KEEP_ENV, "")
    try:
        return max(0.0, float(raw)) if raw.strip() else DEFAULT_KEEP_S
    except ValueError:
        return DEFAULT_KEEP_S


def runtime_dir() -> Path | None:
    """This user's folder for the keeper's socket, made 0700 if missing; None where it is not a folder of this user
    closed to everyone else (then nothing is kept)."""
    explicit = os.environ.get(RUNTIME_ENV)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    temp = os.environ.get("TMPDIR") or os.environ.get("TEMP") or os.environ.get("TMP") or "/tmp"  # (tempfile's order)
    folder = Path(explicit) if explicit else Path(xdg) / "collapsewatch" if xdg else Path(temp) / f"collapsewatch-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, parents=bool(explicit or xdg), exist_ok=True)
        st = os.lstat(folder)
    except OSError:
        return None
    import stat

    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return folder


def digest(env: dict[str, str] | None = None) -> str:
    """What a keeper must share with a command to run it: interpreter, the package's files, start-up variables."""
    env = os.environ if env is None else env
    h = hashlib.sha256(f"{sys.executable}\0{sys.version}\0{_PACKAGE}\0".encode())
    for folder, subs, files in os.walk(_PACKAGE):
        subs[:] = sorted(s for s in subs if s != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                st = os.stat(os.path.join(folder, name))
                h.update(f"{folder}/{name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    for key in sorted(k for k in env if k.startswith(DIGEST_PREFIXES) and k != RUNTIME_ENV):
        h.update(f"{key}={env[key]}\0".encode())
    return h.hexdigest()[:20]


def socket_path() -> Path | None:
    """This configuration's keeper socket; None where nothing may be kept."""
    if keep_seconds() <= 0:
        return None
    folder = runtime_dir()
    if folder is None:
        return None
    path = folder / f"cli-{digest()}.sock"
    return path if len(os.fsencode(path)) <= MAX_SOCKET_PATH else None


# ---- the command's side ------------------------------------------------------------------------------------------


def run(argv: list[str]) -> int | None:
    """Run ``collapsewatch ARGV`` in a kept warm process and return its exit status; None where none took it (none
    kept, or none within ``HELLO_S``): the caller runs the command itself, and a keeper is started for the next."""
    path = socket_path()
    if path is None:
        return None
    conn = _connect(path)
    if conn is None:  # started when this command is done, so that its imports do not slow this one
        import atexit

        atexit.register(start_keeper, path)
        return None
    with conn:
        try:
            pid = struct.unpack("<q", _recv_exact(conn, 8))[0]
        except (OSError, EOFError):  # no warm process took it in time: run here (the keeper stays for the next)
            return None
        conn.settimeout(None)
        return _send_and_wait(conn, pid, argv)


def _connect(path: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(os.fspath(path))
    except OSError:  # none listening (never started, exited, or a socket file left by one that was killed)
        conn.close()
        return None
    conn.settimeout(HELLO_S)
    return conn


def _send_and_wait(conn: socket.socket, pid: int, argv: list[str]) -> int:
    import json
    import signal

    request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    fds, opened = [], []
    for fd in (0, 1, 2):  # a closed stdio stream is passed on as /dev/null
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            opened.append(os.open(os.devnull, os.O_RDWR))
            fds.append(opened[-1])
    try:
        conn.sendmsg([struct.pack("<q", len(request))], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(_fd_array(fds)))])
        conn.sendall(request)
    finally:
        for fd in opened:
            os.close(fd)

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except OSError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    try:
        return struct.unpack("<i", _recv_exact(conn, 4))[0]
    except (OSError, EOFError):
        sys.stderr.write(f"collapsewatch: the process that ran the command (pid {pid}) ended without an exit status\n")
        return 1


def _fd_array(fds: list[int]):
    import array

    return array.array("i", fds)


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def start_keeper(path: Path) -> None:
    """Start a keeper for ``path`` in its own session, detached from this command's terminal and pipes."""
    import subprocess

    subprocess.Popen([sys.executable, "-m", "collapsewatch.kept", "serve", os.fspath(path)],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, close_fds=True)


# ---- the keeper --------------------------------------------------------------------------------------------------


def serve(path: Path, keep_s: float) -> None:
    """Listen on ``path`` (taking it over atomically from any earlier keeper), keep one warm process waiting on it,
    start the next when one takes a command, and exit after ``keep_s`` seconds without a command or when ``path``
    is no longer this keeper's socket."""
    import select
    import signal
    import subprocess
    import time

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # ended by a signal: still end its warm process
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    listener.bind(os.fspath(tmp))
    listener.listen(16)
    os.replace(tmp, path)
    ino = os.stat(path).st_ino
    done: list[subprocess.Popen] = []

    def spawn() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "collapsewatch.kept", "warm", str(listener.fileno())],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                pass_fds=[listener.fileno()])

    warm = spawn()
    last = time.monotonic()
    try:
        while True:
            ready = select.select([warm.stdout], [], [], 1.0)[0]
            if ready:
                taken = os.read(warm.stdout.fileno(), 1) == b"a"
                warm.stdout.close()
                done.append(warm)
                if not taken:  # it ended before taking a command (it could not start): stop keeping
                    break
                last = time.monotonic()
                warm = spawn()
            done = [p for p in done if p.poll() is None]
            try:
                mine = os.stat(path).st_ino == ino
            except OSError:
                mine = False
            if not mine or time.monotonic() - last > keep_s:
                break
    finally:
        if warm.poll() is None:
            warm.terminate()
            warm.wait()
        try:
            if os.stat(path).st_ino == ino:
                os.unlink(path)
        except OSError:
            pass
        listener.close()


# ---- a warm process ----------------------------------------------------------------------------------------------


def warm(listen_fd: int) -> None:
    """Import what ``sql`` needs and start its SQL worker, take one connection from the keeper's socket (this
    user's only), tell the keeper, then run the command it brings with its stdio, folder and environment, and send
    back the exit status."""
    import importlib
    import json

    notify = os.dup(1)
    from . import cli
    from .store import opening, sqlproc  # noqa: F401  (imported before the command: what `sql` runs)
    from .store.limits import Limits

    for name in ("typer._adapters", "pyarrow.ipc", "collapsewatch.boxtable"):  # Typer's coercion (pydantic) and
        try:  # the answer's decoder, imported when a command first runs
            importlib.import_module(name)
        except ImportError:
            pass
    sqlproc.prestart(Limits().process_bytes)
    listener = socket.socket(fileno=listen_fd)
    listener.settimeout(1.0)
    keeper = os.getppid()
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != keeper:  # the keeper was killed: nobody will start another, nor end this one
                return
            continue
        conn.settimeout(None)
        pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        if uid == os.getuid():
            break
        conn.close()
    listener.close()
    os.write(notify, b"a")
    os.close(notify)
    code = 1
    try:
        conn.sendall(struct.pack("<q", os.getpid()))
        head, fds, _, _ = _recv_fds(conn)
        request = json.loads(_recv_exact(conn, struct.unpack("<q", head)[0]).decode())
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        _reopen_stdio()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["collapsewatch", *request["argv"]]
        try:
            cli.main(request["argv"])
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, int | None):
                print(e.code, file=sys.stderr)
        except KeyboardInterrupt:
            code = 130
        except Exception:  # a traceback the command lets escape goes to the caller's stderr, as in its own process
            import traceback

            traceback.print_exc()
            code = 1
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
    finally:
        # the caller's stdio let go before the status is sent: a caller reading the command's output to its end
        # (a pipe) sees it end with the command, not when this process has ended its SQL worker
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        try:
            conn.sendall(struct.pack("<i", code))
        except OSError:
            pass
        conn.close()
        sqlproc.close_idle()


def _recv_fds(conn: socket.socket) -> tuple[bytes, list[int], int, object]:
    import array

    fds = array.array("i")
    msg, ancdata, flags, addr = conn.recvmsg(8, socket.CMSG_LEN(3 * fds.itemsize))
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    if len(msg) < 8 or len(fds) != 3:
        raise EOFError("a command came without its stdin, stdout and stderr")
    return msg, list(fds), flags, addr


def _reopen_stdio() -> None:
    """New stdio streams over fds 0-2 (now the command's): line-buffered where they are a terminal, as in a process
    started there."""
    sys.stdin = open(0, encoding=sys.stdin.encoding, errors=sys.stdin.errors, closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding=sys.stdout.encoding, errors=sys.stdout.errors, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding=sys.stderr.encoding, errors="backslashreplace", closefd=False,  # noqa: SIM115
                      buffering=1)


def main(args: list[str]) -> None:
    if args[:1] == ["serve"] and len(args) == 2:
        serve(Path(args[1]), keep_seconds())
    elif args[:1] == ["warm"] and len(args) == 2:
        warm(int(args[1]))
    else:
        sys.exit("usage: python -m collapsewatch.kept serve SOCKET | warm FD")


if __name__ == "__main__":
    main(sys.argv[1:])
