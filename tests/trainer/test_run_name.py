"""`collapsewatch train` refuses to merge a new run into an existing one; --resume is the way to continue it."""

from __future__ import annotations

from collapsewatch import Monitor, connect
from collapsewatch.trainer.cli import main


def test_train_refuses_an_existing_run_name_without_resume(store, capsys):
    Monitor(store, "taken", detectors=False).close()
    rc = main(["--store", str(store), "--run", "taken", "--steps", "1", "--set", "progress=false"])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1, err  # one line, no traceback
    assert "run 'taken' already exists" in err and "--resume" in err and "taken-2" in err
    assert connect(store).execute("SELECT count(*) FROM steps").fetchone() == (0,)  # nothing was merged into it
