"""lab/public/csv_join.py: wide per-step CSVs of one run joined by step. The inputs are hand-made (the column names of
BasiaKoch/tpu-2026's two curve files, made-up values); the expected rows are written out by hand."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

PUBLIC = Path(__file__).resolve().parents[2] / "lab" / "public"
spec = importlib.util.spec_from_file_location("csv_join", PUBLIC / "csv_join.py")
csv_join = importlib.util.module_from_spec(spec)
assert spec.loader is not None
spec.loader.exec_module(csv_join)


def _rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as f:
        return list(csv.reader(f))


def test_two_files_join_by_step_with_an_offset_and_no_row_is_invented(tmp_path, capsys):
    reward = tmp_path / "reward.csv"
    reward.write_text("step,rewards/train/mean\n0,0.5\n1,0.75\n2,1.0\n")
    kl = tmp_path / "kl.csv"
    kl.write_text("step,actor/train/kl\n1,0.01\n2,0.02\n3,0.03\n4,0.04\n")  # one step ahead: --offset kl=-1
    out = tmp_path / "joined.csv"
    assert csv_join.main([str(out), str(reward), str(kl), "--offset", "kl=-1"]) == 0
    assert _rows(out) == [["step", "rewards/train/mean", "actor/train/kl"],
                          ["0", "0.5", "0.01"], ["1", "0.75", "0.02"], ["2", "1.0", "0.03"],
                          ["3", "", "0.04"]]  # step 3: only kl.csv has it (4 − 1); its reward cell stays empty
    assert "2 files: 4 steps, 2 columns" in capsys.readouterr().out
    # without the offset, step 0 has no kl and step 3 no reward: the union of steps, nothing moved
    assert csv_join.main([str(out), str(reward), str(kl)]) == 0
    assert [r[0] for r in _rows(out)[1:]] == ["0", "1", "2", "3", "4"]
    assert _rows(out)[1] == ["0", "0.5", ""]


def test_a_column_in_two_files_a_repeated_step_and_a_bad_offset_are_refused(tmp_path, capsys):
    a = tmp_path / "orchestrator.csv"
    a.write_text("_step,_runtime,step,reward/mean\n0,1.5,0,0.25\n")
    b = tmp_path / "trainer.csv"
    b.write_text("_step,_runtime,step,entropy/mean\n0,2.5,0,0.75\n")
    out = tmp_path / "out.csv"
    assert csv_join.main([str(out), str(a), str(b)]) == 1
    assert f"column '_step' is in both {a} and {b}" in capsys.readouterr().err
    assert not out.exists()
    assert csv_join.main([str(out), str(a), str(b), "--drop", "_step", "--drop", "_runtime"]) == 0
    assert _rows(out) == [["step", "reward/mean", "entropy/mean"], ["0", "0.25", "0.75"]]
    twice = tmp_path / "twice.csv"
    twice.write_text("step,x\n1,0.5\n1,0.75\n")
    assert csv_join.main([str(out), str(a), str(twice)]) == 1
    assert f"{twice} line 3: step 1 is there twice" in capsys.readouterr().err
    assert csv_join.main([str(out), str(a), str(b), "--offset", "nope=1"]) == 1
    assert "--offset nope=1: 'nope' names 0 of the input files" in capsys.readouterr().err
    assert csv_join.main([str(out), str(a)]) == 2
