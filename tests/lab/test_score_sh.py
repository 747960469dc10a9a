"""lab/public/score.sh in a checkout without an activated venv (s32 #14): it finds the checkout's
.venv/bin/collapsewatch and .venv/bin/python by itself, and ends with one summary line — the episodes table goes to a
file, not to stdout. A copy of the script in a folder laid out as a checkout (``lab/public/``, ``.venv/bin/`` linking
this interpreter and its ``collapsewatch``), with a two-run sources.csv: one raw file present, one missing."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    cw = Path(sys.executable).parent / "collapsewatch"
    if not cw.exists():
        pytest.skip("no collapsewatch console script beside this interpreter")
    pub = tmp_path / "co" / "lab" / "public"
    (pub / "raw").mkdir(parents=True)
    shutil.copy(ROOT / "lab" / "public" / "score.sh", pub / "score.sh")
    venv = tmp_path / "co" / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    (venv / "collapsewatch").symlink_to(cw)
    # 30 steps of a flat, healthy-looking run: the grad norm jumps to 40 × at step 20 for 3 steps (a grad episode)
    rows = [{"step": i, "reward_mean": 0.5, "grad_norm": 40.0 if 20 <= i < 23 else 1.0} for i in range(30)]
    body = "".join(json.dumps(r) + "\n" for r in rows)
    (pub / "raw" / "here.jsonl").write_text(body)
    sha = hashlib.sha256(body.encode()).hexdigest()
    (pub / "sources.csv").write_text("run,file,repo,path,commit,sha256\n"
                                     f"here,here.jsonl,o/r,logs/here.jsonl,{'0' * 40},{sha}\n"
                                     f"gone,gone.jsonl,o/r,logs/gone.jsonl,{'0' * 40},{'0' * 64}\n")
    (pub / "labels.csv").write_text("run,kind,onset,collapse\nhere,,,\ngone,,,\n")
    return tmp_path / "co"


def test_score_sh_uses_the_checkouts_venv_and_ends_with_a_summary(checkout: Path, tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", str(tmp_path)),
           "COLLAPSEWATCH_CACHE": str(tmp_path / "cache")}  # no venv on PATH, no COLLAPSEWATCH / PYTHON
    done = subprocess.run(["bash", str(checkout / "lab" / "public" / "score.sh"), str(tmp_path / "st")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "missing gone: fetch https://github.com/o/r/blob/" in done.stderr
    episodes = tmp_path / "st.episodes.csv"  # the default: next to the store
    table = episodes.read_text().splitlines()
    assert table[0].startswith("run,detector,phase,") and len(table) >= 2  # the episodes, in the file
    last = done.stdout.strip().splitlines()[-1]
    # 1 of the 2 runs ingested, the other missing; the episode count is the file's rows
    assert last.startswith("ingested 1 of the 2 runs of lab/public/sources.csv (1 missing: listed above); "
                           f"{len(table) - 1} episode(s) on 1 run(s) ("), last
    assert last.endswith(f": {episodes}") and "run,detector" not in done.stdout


def test_score_sh_without_a_collapsewatch_says_so_in_one_line(checkout: Path, tmp_path: Path) -> None:
    shutil.rmtree(checkout / ".venv")
    done = subprocess.run(["bash", str(checkout / "lab" / "public" / "score.sh"), str(tmp_path / "st")],
                          env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == "score.sh: 'collapsewatch' not found: make the checkout's .venv (README) or set COLLAPSEWATCH\n"
