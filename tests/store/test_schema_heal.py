"""A store survives its ``_schema`` files: a missing or corrupt one costs nothing to readers (they read the package's
own schema, rebuilt from the migrations, and never write the store), ``check`` names it, ``check --repair`` and the
next writer rewrite it. On the code before, each case below ended every command in a traceback."""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from collapsewatch.cli import app as cli_app
from collapsewatch.store import Store, StoreWriter, queries
from collapsewatch.store.writer import arrow_schemas
from tests.store.dash_pages import assert_pages_render


def _cli(*args: str):
    return CliRunner().invoke(cli_app, list(args))


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _damage(kind: str, root: Path) -> Path:
    """Damage one ``_schema`` file the way the issue's trial did; returns the path ``check`` must name."""
    if kind == "tokens_removed":  # the whole folder of one table's template
        shutil.rmtree(root / "_schema" / "tokens")
        return root / "_schema" / "tokens" / "empty.parquet"
    path = root / "_schema" / "step_metrics" / "empty.parquet"
    if kind == "garbage":
        path.write_bytes(b"\x00garbage, not parquet\n" * 10)
    elif kind == "foreign":  # a readable Parquet file of other columns
        pq.write_table(pa.table({"user_id": [1, 2]}), path)
    return path


@pytest.fixture(params=["tokens_removed", "garbage", "foreign"])
def damaged(request, tmp_path) -> tuple[Path, Path]:
    """Run a: steps 0..3 in two flushes (step, sequence and token rows), finished; then one _schema file damaged."""
    w = StoreWriter(tmp_path, "a", heartbeat_s=3600)
    for steps in ([0, 1], [2, 3]):
        n = len(steps)
        w.append("step_metrics", {"run": ["a"] * n, "rank": [0] * n, "step": steps, "n_seqs": [2] * n,
                                  "ts": [datetime.now(timezone.utc)] * n, "reward_mean": [0.5] * n})
        w.append("sequences", {"run": ["a"] * 2 * n, "rank": [0] * 2 * n, "step": steps * 2, "seq_id": [0, 1] * n})
        w.append("tokens", {"run": ["a"] * n, "rank": [0] * n, "step": steps, "seq_id": [0] * n, "pos": [0] * n,
                               "mask": [True] * n})
        w.flush()
    w.flush(status="finished")
    return tmp_path, _damage(request.param, tmp_path)


def test_every_reader_works_and_writes_nothing(damaged):
    root, broken = damaged
    before = _files(root)
    out = _cli("runs", str(root), "--json")
    assert out.exit_code == 0, out.output
    assert [(r["run"], r["n_steps"], r["status"]) for r in json.loads(out.stdout)] == [("a", 4, "finished")]
    # 4 steps × 2 sequences = 8 sequence rows; 4 token rows (one per step)
    q = "SELECT (SELECT count(*) FROM sequences) AS s, (SELECT count(*) FROM tokens) AS t, (SELECT count(*) FROM steps) AS n"
    out = _cli("sql", str(root), q, "--json")
    assert out.exit_code == 0 and json.loads(out.stdout) == [{"s": 8, "t": 4, "n": 4}], out.output
    assert _cli("detect", str(root), "--run", "a").exit_code == 0
    s = Store(root)
    assert queries.step_rows(s, "a", ["reward_mean"])["step"].tolist() == [0, 1, 2, 3]
    assert len(queries.token_steps(s, "a")) == 4
    from collapsewatch.dashboard import create_app

    assert_pages_render(create_app(root).server.test_client(), ("/", "/run/a", "/tokens/a", "/compare", "/sql"))
    assert _files(root) == before  # no reader rewrote the schema file
    out = _cli("check", str(root))
    assert out.exit_code == 1 and str(broken) in out.stdout and "--repair" in out.stdout, out.output
    assert len(out.stdout.strip().splitlines()) == 1  # that file only: no segment is called bad
    out = _cli("compact", str(root))
    assert out.exit_code == 0 and "compacted 1 run(s)" in out.stdout, out.output
    out = _cli("sql", str(root), q, "--json")
    assert out.exit_code == 0 and json.loads(out.stdout) == [{"s": 8, "t": 4, "n": 4}], out.output


def test_check_repair_rewrites_it(damaged):
    root, broken = damaged
    out = _cli("check", str(root), "--repair")
    assert out.exit_code == 0 and "rewrote" in out.stdout and str(broken) in out.stdout, out.output
    table = broken.parent.name
    assert pq.read_schema(broken).equals(arrow_schemas()[table])  # the template as the migrations define it
    out = _cli("check", str(root))
    assert out.exit_code == 0 and "no bad files" in out.stdout, out.output
    assert not list((root / "_schema").rglob(".*.tmp"))  # rewritten by rename: no temporary left


def test_the_next_writer_rewrites_it(damaged):
    root, broken = damaged
    StoreWriter(root, "b", heartbeat_s=3600).flush(status="finished")
    assert pq.read_schema(broken).equals(arrow_schemas()[broken.parent.name])
    assert _cli("check", str(root)).exit_code == 0
