"""`collapsewatch train --store s3://…` against a real S3 server on 127.0.0.1 (moto, tests/store/s3server.py): the
run is written to the bucket, its checkpoint only to a local `--checkpoint-dir` (never a folder named `s3:`), and
what needs a checkpoint without one is refused in one line."""

from __future__ import annotations

import pytest

from collapsewatch.store import connect
from collapsewatch.trainer.checkpoint import CONFIG_FILE
from collapsewatch.trainer.cli import main
from tests.store import s3server

BUCKET = "cw-train"
SMALL = ["--set", "prompts_per_rollout=2", "--set", "group_size=4", "--set", "max_turn_tokens=24",
         "--set", "max_response_tokens=120", "--set", "progress=false", "--set", "sentinels=0"]


s3 = s3server.module_server(BUCKET)


@pytest.fixture
def url(s3, tmp_path, monkeypatch):
    # the cache stays the session's (its built tiny model; a fresh one would rebuild it): the spool and mirror in it
    # are keyed by the URL, a fresh prefix
    monkeypatch.chdir(tmp_path)  # a checkpoint written to Path("s3://…") would land in ./s3:/
    return s3server.reach(s3, monkeypatch, bucket=BUCKET)


def test_train_on_an_s3_store_checkpoints_to_checkpoint_dir_and_resumes(url, tmp_path, capsys):
    ck = tmp_path / "ck"
    # checkpoint_every / --resume without a local checkpoint folder: refused before training, naming the option
    assert main(["--store", url, "--run", "t", "--steps", "1", "--set", "checkpoint_every=1", *SMALL]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "checkpoint_every: the store" in err and "--checkpoint-dir" in err, err
    assert main(["--store", url, "--run", "t", "--steps", "2", "--resume"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: --resume: the store '{url}' is an object store") and err.count("\n") == 1, err
    # without one the run trains into the bucket and says it keeps no checkpoint
    assert main(["--store", url, "--run", "t", "--steps", "1", *SMALL]) == 0
    assert "(no checkpoint kept: pass --checkpoint-dir for one)" in capsys.readouterr().out
    # an existing run name in the bucket is refused before the model loads (its run row read from the bucket)
    assert main(["--store", url, "--run", "t", "--steps", "1", *SMALL]) == 1
    assert "run 't' already exists in store" in capsys.readouterr().err
    assert main(["--store", url, "--run", "u", "--steps", "1", "--checkpoint-dir", str(ck), *SMALL]) == 0
    assert (ck / CONFIG_FILE).is_file()
    assert main(["--store", url, "--run", "u", "--steps", "2", "--resume", "--checkpoint-dir", str(ck)]) == 0
    assert not (tmp_path / "s3:").exists()  # nothing written to a local folder named after the URL
    con = connect(url)
    # run t: step 0; run u: step 0, then step 1 after the resume
    assert con.execute("SELECT run, step FROM steps ORDER BY run, step").fetchall() == [("t", 0), ("u", 0), ("u", 1)]
