"""docs/trl.md's opening script runs as pasted: its Python block trains a real TRL run offline, and its shell lines
read that run back (every column the first SQL example selects holds a value on every step)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

DOC = Path(__file__).resolve().parents[2] / "docs" / "trl.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", DOC.read_text(), flags=re.M | re.S)


def test_the_opening_script_runs_as_pasted(tmp_path):
    script, shell = _blocks("python")[0], _blocks("sh")[0]
    assert "tiny_model_and_tokenizer" in script and "collapsewatch[trl]" in DOC.read_text().split("```")[0]
    # offline, in a fresh folder, with the installed package only (not this checkout's tests/ on the path)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": ""}
    (tmp_path / "example.py").write_text(script)
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in shell.splitlines() if line.strip()]
    for line in lines:  # each shell line, as written
        out = subprocess.run(line, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, (line, out.stderr[-2000:])
        assert out.stdout.strip(), line
        if line.startswith("collapsewatch detect"):  # what the doc's next paragraph says it prints (s32 #14)
            assert "1 info episode" in out.stdout and "length · budget" in out.stdout, out.stdout
            assert "a configuration finding, not a collapse" in out.stdout and "collapsed" not in out.stdout.lower()
            assert "`length · budget`" in DOC.read_text() and "length blow-up" not in DOC.read_text()
    sql = next(line for line in lines if line.startswith("collapsewatch sql"))
    rows = json.loads(subprocess.run(sql + " --json", shell=True, cwd=tmp_path, env=env, capture_output=True,
                                     text=True, timeout=300, check=True).stdout)
    # max_steps=4 and TRL's default schedule: steps 1..4, and every selected column holds a value on each of them
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert all(v is not None for r in rows for v in r.values()), rows
