"""The wheel a `pip install collapsewatch` user gets: built from the sources, installed into a new venv (no
editable install, no checkout on sys.path), it has its CLI, its migrations, its dashboard with assets and the
sample runs `collapsewatch demo` copies.

To stay inside `make test`'s time the new venv borrows the test venv's installed dependencies through a path
entry (their versions are the lock's, which `make test` installs); collapsewatch itself comes only from the wheel,
and the test checks that it does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pytest

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

WRITE_STORE = """
import torch
from collapsewatch import Monitor, TokenBatch
with Monitor("store", "w", detectors=False) as mon:
    for step in range(3):
        lp = torch.tensor([[-1.0, -2.0], [-0.5, -1.5]])
        mon.observe(TokenBatch(logp=lp, mask=torch.ones(2, 2), logp_old=lp, advantages=torch.tensor([1.0, -1.0]),
                               rewards=torch.tensor([1.0, 0.0])), step=step)
"""


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # a copy, so that building leaves no build/ or egg-info in the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("collapsewatch", "dashboard", "sample_runs/store"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp / "dist"), str(src)], check=True, cwd=tmp)
    (wheel,) = (tmp / "dist").glob("collapsewatch-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(wheel)],
                   check=True, cwd=tmp)
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # the borrowed dependencies, after the venv's own site-packages (a .pth line is appended to sys.path); the
    # test venv's editable finder is a .pth of its own site folder, which a plain path entry does not run
    (Path(site) / "_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _run(venv: Path, program: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``program`` (python, collapsewatch) of the wheel's venv, run outside the checkout."""
    return subprocess.run([str(venv / "bin" / program), *args], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=300)


def test_wheel_has_cli_migrations_and_dashboard(wheel_venv: Path, tmp_path: Path) -> None:
    where = _run(wheel_venv, "python", "-c",
                 "import collapsewatch, collapsewatch.dashboard as d; print(collapsewatch.__file__); print(d.__file__)",
                 cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    for path in where.stdout.split():
        assert path.startswith(str(wheel_venv)), path  # from the wheel, not the checkout
    assert _run(wheel_venv, "collapsewatch", "--help", cwd=tmp_path).returncode == 0

    wrote = _run(wheel_venv, "python", "-c", WRITE_STORE, cwd=tmp_path)  # migrations come from the wheel
    assert wrote.returncode == 0, wrote.stderr
    # 3 steps of rewards [1, 0]: each step's reward_mean is 0.5
    sql = _run(wheel_venv, "collapsewatch", "sql", "store", "SELECT count(*) AS n, avg(reward_mean) AS r FROM steps",
               "--json", cwd=tmp_path)
    assert sql.returncode == 0, sql.stderr
    assert json.loads(sql.stdout) == [{"n": 3, "r": 0.5}]
    runs = _run(wheel_venv, "collapsewatch", "runs", "store", cwd=tmp_path)
    assert runs.returncode == 0 and "w" in runs.stdout, runs.stderr
    assert _run(wheel_venv, "collapsewatch", "detect", "store", cwd=tmp_path).returncode == 0

    port = free_port()
    server = subprocess.Popen([str(wheel_venv / "bin" / "collapsewatch"), "dash", "store", "--port", str(port)],
                              cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        page = css = None
        for _ in range(120):  # the app imports Dash and plotly: seconds on a busy machine
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read().decode()
                css = urllib.request.urlopen(f"http://127.0.0.1:{port}/assets/style.css", timeout=5).read()
                break
            except OSError:
                assert server.poll() is None, server.stderr.read().decode()
                time.sleep(0.5)
        assert page is not None and "_dash-config" in page  # a Dash page, from 127.0.0.1 (the default bind)
        assert css and css == (ROOT / "dashboard" / "assets" / "style.css").read_bytes()  # assets in the wheel
    finally:
        server.terminate()
        server.wait(timeout=30)


COPY_SAMPLES = """
import json, pathlib
from collapsewatch.demo import SAMPLE_RUNS, copy_sample_runs
from collapsewatch.store.writer import ensure_schema
ensure_schema(pathlib.Path("demo"))  # as run_demo does
print(json.dumps([str(SAMPLE_RUNS), copy_sample_runs(pathlib.Path("demo"))]))
"""


def test_wheel_ships_the_sample_runs(wheel_venv: Path, tmp_path: Path) -> None:
    out = _run(wheel_venv, "python", "-c", COPY_SAMPLES, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    where, copied = json.loads(out.stdout)
    assert where.startswith(str(wheel_venv)), where  # from the wheel, not the checkout
    # every run folder of the checkout's sample store (the ones with a runs/ table) is copied from the wheel
    shipped = sorted(p.name for p in (ROOT / "sample_runs" / "store").iterdir() if (p / "runs").is_dir()
                     and not p.name.startswith("_"))
    assert copied == shipped and len(shipped) >= 2
    runs = _run(wheel_venv, "collapsewatch", "runs", "demo", "--json", cwd=tmp_path)
    assert runs.returncode == 0, runs.stderr
    assert sorted(r["run"] for r in json.loads(runs.stdout)) == shipped


TRUST = """
import json
from collapsewatch import trust
data = trust.load()
print(json.dumps([str(trust.TRUST_FILE), len(data.get("rows", []))]))
"""


def test_wheel_ships_the_trust_figures(wheel_venv: Path, tmp_path: Path) -> None:
    # detect and the run page print each alarm's trust line from collapsewatch/data/trust.json; a wheel without it
    # loads {} and shows no trust at all, silently. Expected: the file the wheel installed, with as many rows as
    # the checkout's copy (the same file, shipped byte for byte).
    out = _run(wheel_venv, "python", "-c", TRUST, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    where, rows = json.loads(out.stdout)
    assert where.startswith(str(wheel_venv)), where  # from the wheel, not the checkout
    expected = len(json.loads((ROOT / "collapsewatch" / "data" / "trust.json").read_text())["rows"])
    assert expected > 0 and rows == expected
