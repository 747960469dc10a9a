"""Reading a store never writes into it: a store whose ``_schema`` is older than the code (e.g. the shipped
sample store after a new migration) reads with the current columns, and every file stays byte-identical."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

from collapsewatch.cli import app as cli_app
from collapsewatch.store import Store, StoreWriter, queries


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_an_older_store_reads_without_being_upgraded(tmp_path):
    w = StoreWriter(tmp_path, "old", heartbeat_s=3600)
    w.append("step_metrics", {"run": ["old"], "rank": [0], "step": [0], "n_seqs": [4],
                              "ts": [datetime.now(timezone.utc)]})
    w.flush(status="finished")
    # make it look written before the latest migration: VERSION 1 and a runs table without the newest column
    (tmp_path / "_schema" / "VERSION").write_text("1")
    empty = tmp_path / "_schema" / "runs" / "empty.parquet"
    t = pq.read_table(empty)
    newest = t.column_names[-1]
    pq.write_table(t.drop([newest]), empty)
    row = tmp_path / "old" / "runs" / "r0.parquet"  # and a run row written by that older writer
    pq.write_table(pq.read_table(row).drop([newest]), row)
    before = _files(tmp_path)
    runner = CliRunner()
    out = runner.invoke(cli_app, ["runs", str(tmp_path), "--json"])
    assert out.exit_code == 0 and [r["run"] for r in json.loads(out.stdout)] == ["old"], out.output
    out = runner.invoke(cli_app, ["sql", str(tmp_path), f"SELECT count(*) AS n FROM run_ranks WHERE {newest} IS NULL",
                                  "--json"])
    assert out.exit_code == 0 and json.loads(out.stdout) == [{"n": 1}], out.output
    assert runner.invoke(cli_app, ["detect", str(tmp_path)]).exit_code == 0
    assert runner.invoke(cli_app, ["check", str(tmp_path)]).exit_code == 0
    s = Store(tmp_path)
    assert queries.run_info(s, "old")["status"] == "finished"
    assert queries.token_steps(s, "old").empty
    assert _files(tmp_path) == before


def test_a_store_at_the_same_version_with_a_stale_template_reads(tmp_path):
    # The previous release wrote VERSION "2" and step templates without the metrics added since (the per-turn
    # ratio metrics came from the catalogue, with no new migration). Reading such a store with today's code
    # failed every detector read: "Referenced column turn_ratio_mean_pos not found". Now its VERSION differs
    # from SCHEMA_STAMP (version + digest), so it is read through the current schema and stays byte-identical.
    from collapsewatch.catalogue import STEP_METRICS
    from collapsewatch.offline import run_steps
    from collapsewatch.store.migrations import LATEST_VERSION, SCHEMA_STAMP

    assert SCHEMA_STAMP.split()[0] == str(LATEST_VERSION) and SCHEMA_STAMP != str(LATEST_VERSION)
    w = StoreWriter(tmp_path, "old", heartbeat_s=3600)
    w.append("step_metrics", {"run": ["old"], "rank": [0], "step": [0], "n_seqs": [4],
                              "ts": [datetime.now(timezone.utc)]})
    w.flush(status="finished")
    added = [m.name for m in STEP_METRICS][-3:]  # stand for the metrics added after the store was written
    newest = added[-1]
    (tmp_path / "_schema" / "VERSION").write_text(str(LATEST_VERSION))
    empty = tmp_path / "_schema" / "step_metrics" / "empty.parquet"
    pq.write_table(pq.read_table(empty).drop(added), empty)
    for seg in (tmp_path / "old" / "step_metrics").rglob("*.parquet"):  # its segments lack them too
        t = pq.read_table(seg)
        pq.write_table(t.drop([c for c in t.column_names if c in added]), seg)
    before = _files(tmp_path)
    df = run_steps(Store(tmp_path), "old")
    assert list(df["step"]) == [0] and df[newest].isna().all()
    assert CliRunner().invoke(cli_app, ["detect", str(tmp_path)]).exit_code == 0
    assert _files(tmp_path) == before
