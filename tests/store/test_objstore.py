"""A store at an object-store URL (``s3://bucket/prefix``) against a real S3 server on 127.0.0.1 (moto): the publish
rule, every command on the URL, and two writer "machines" (separate spools) with a reader and a SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from collapsewatch import Monitor
from collapsewatch.store import Store, StoreWriter, connect
from collapsewatch.store.location import Location, is_url, parse_url, published
from tests.conftest import random_batch
from tests.store import s3server
from tests.store.dash_pages import assert_pages_render

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "cw-test"


s3 = s3server.module_server(BUCKET)


@pytest.fixture
def url(s3, tmp_path, monkeypatch):
    """A fresh prefix of the test bucket; this process reaches it through the environment, and caches (mirror,
    spool) under tmp_path."""
    return s3server.reach(s3, monkeypatch, str(tmp_path / "cache"), BUCKET)


def test_publish_rule_on_a_hand_listing():
    info = (1, 1)
    listing = {
        "_schema/VERSION": info,
        "a/step_metrics/r0-000001-0123abcd.parquet": info,   # flush 1 of rank 0: marker below -> seen
        "a/sequences/r0-000001-0123abcd.parquet": info,
        "a/_published/r0-000001-0123abcd": info,             # the marker itself is never mirrored
        "a/step_metrics/r0-000002-0123abcd.parquet": info,   # flush 2: no marker yet (half a flush) -> hidden
        "a/step_metrics/r1-000002-0123abcd.parquet": info,   # same flush number, rank 1: its own marker (absent)
        "a/step_metrics/r0-compact-feedbeef.parquet": info,  # one PUT: published by itself
        "a/runs/r0.parquet": info,
        "a/a.duckdb": info,                                  # an export: readers read the segments
        "_quarantine/a/step_metrics/x.parquet": info,
    }
    assert sorted(published(listing)) == ["_schema/VERSION", "a/runs/r0.parquet",
                                          "a/sequences/r0-000001-0123abcd.parquet",
                                          "a/step_metrics/r0-000001-0123abcd.parquet",
                                          "a/step_metrics/r0-compact-feedbeef.parquet"]


def test_store_urls_are_parsed_and_credentials_refused(s3, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    assert is_url("s3://b/p") and is_url("s3:/b/p") and not is_url("/tmp/store") and not is_url("store")
    r = parse_url("s3:/bucket/a/b/")  # what pathlib makes of s3://bucket/a/b/
    assert (r.bucket, r.prefix, r.url) == ("bucket", "a/b", "s3://bucket/a/b")
    for bad, needle in (("s3://key:secret@bucket/p", "never from the store path"),
                        ("s3://bucket/p?endpoint_override=x", "never from the store path"),
                        ("gs://bucket/p", "not supported"), ("s3://", "names no bucket")):
        with pytest.raises(ValueError, match=needle):
            parse_url(bad)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "localhost:9000")
    with pytest.raises(ValueError, match="AWS_ENDPOINT_URL"):
        parse_url("s3://bucket/p")


def test_a_flush_is_seen_only_once_published(url, monkeypatch):
    w = StoreWriter(url, "half", compact_every=0)
    w.append("scalars", {"run": ["half"], "rank": [0], "step": [0], "key": ["lr"], "value": [1.0]})
    assert w.flush("running")
    # flush 2: its segments are uploaded, then the marker fails (as if the process died before writing it)
    w.append("scalars", {"run": ["half"], "rank": [0], "step": [1], "key": ["lr"], "value": [2.0]})
    w.append("step_metrics", {"run": ["half"], "rank": [0], "step": [1]})

    def no_marker(self, run, names):
        raise OSError("injected: marker not written")

    publish = Location.publish
    monkeypatch.setattr(Location, "publish", no_marker)
    assert not w.flush()
    keys = sorted(parse_url(url).list())
    assert "half/scalars/r0-000002-" + w._uid + ".parquet" in keys  # uploaded under its final name ...
    s = Store(url)
    # ... yet unseen: flush 1's one scalar row only, and no step row at all
    assert s.query("SELECT count(*) AS n, max(value) AS v FROM scalars").values.tolist() == [[1, 1.0]]
    assert s.query("SELECT count(*) AS n FROM step_metrics")["n"][0] == 0
    monkeypatch.setattr(Location, "publish", publish)
    assert w.flush("finished")  # the retry publishes flush 2 whole
    assert connect(url).execute("SELECT count(*), max(value) FROM scalars").fetchone() == (2, 2.0)
    assert w.write_errors == 1


def _cli(*args: str):
    """The real CLI, in this process (each subprocess would spend seconds importing torch)."""
    from typer.testing import CliRunner

    from collapsewatch.cli import app

    result = CliRunner().invoke(app, list(args))
    result.returncode = result.exit_code
    return result


def test_every_command_works_on_a_url(url):
    with Monitor(url, run="u", detectors=False, flush_steps=1, compact_every=4) as mon:
        for step in range(6):
            mon.observe(random_batch(B=4, T=8, seed=step), step=step)
            mon.log(step, {"grad_norm": float(step)})
    remote = parse_url(url)
    spool = Path(os.environ["COLLAPSEWATCH_CACHE"]) / "spool"
    assert not list(spool.rglob("u/*/r0-*.parquet"))  # all in the bucket: the spool keeps no copy after close
    # 6 steps, compact_every=4: each table's first 4 flush segments were merged live and their markers retired;
    # Monitor.close merged the rest, so no marker is left and every table is one compact segment
    keys = remote.list()
    assert not [k for k in keys if "/_published/" in k]
    assert sorted(k.split("/")[1] for k in keys if k.startswith("u/") and "compact" in k) == [
        "scalars", "sequences", "step_metrics", "tokens"]
    p = _cli("runs", url, "--json")
    assert p.returncode == 0, p.stderr
    assert '"run":"u"' in p.stdout and '"status":"finished"' in p.stdout and '"n_steps":6' in p.stdout
    p = _cli("sql", url, "select count(*) AS n, sum(grad_norm) AS g from steps", "--json")
    assert p.returncode == 0 and p.stdout.strip() == '[{"n":6,"g":15.0}]', p.stderr  # 0+1+...+5 = 15
    p = _cli("detect", url, "--run", "u", "--write")
    assert p.returncode == 0, p.stderr
    assert "u/events/offline-r0.parquet" in remote.list()  # one PUT of the events segment
    p = _cli("watch", url, "--once")
    assert p.returncode == 0, p.stderr
    assert _cli("compact", url).stdout.strip() == "compacted 1 run(s): u"
    assert "u/u.duckdb" in remote.list()  # the export is uploaded; readers never mirror it
    p = _cli("check", url)
    assert p.returncode == 0 and p.stdout.strip() == "no bad files"
    # a corrupt object costs that object: named by its URL, then moved aside in the bucket
    remote.put_bytes("u/step_metrics/r0-compact-0000dead.parquet", b"not parquet")
    p = _cli("check", url)
    assert p.returncode == 1 and p.stdout.startswith(f"{url}/u/step_metrics/r0-compact-0000dead.parquet: not a")
    assert _cli("sql", url, "select count(*) AS n from steps", "--json").stdout.strip() == '[{"n":6}]'
    assert _cli("check", url, "--quarantine").returncode == 0
    assert "_quarantine/u/step_metrics/r0-compact-0000dead.parquet" in remote.list()
    assert _cli("check", url).stdout.strip() == "no bad files"


@pytest.mark.parametrize("command", ["runs", "check", "compact"])
def test_a_url_that_is_no_store_is_named_as_typed(url, command):
    """An empty prefix is no store: the line names the URL, never the local mirror it was synced into (compact named
    ``…/cache/mirror/<bucket>-<prefix>-<hash>``)."""
    p = _cli(command, url)
    assert p.returncode == 1 and p.stderr.strip() == f"error: {url!r} is not a collapsewatch store (no _schema folder)"


READER = """
import os, sys
from collapsewatch.store import Store
errors = reads = half = 0
seen = []
while not os.path.exists(sys.argv[2]):
    try:
        s = Store(sys.argv[1])
        n = int(s.sql("select count(*) n from steps")[0]["n"][0])
        # half a flush would show a step row whose sequence rows (written in the same or an earlier flush) are not
        half += int(s.sql('''select count(*) n from step_metrics m where not exists (select 1 from sequences q
                             where q.rank = m.rank and q.step = m.step)''')[0]["n"][0])
        s.close()
        seen.append(n); reads += 1
    except Exception as e:
        errors += 1; print(repr(e), file=sys.stderr)
print(errors, reads, half, int(all(a <= b for a, b in zip(seen, seen[1:]))))
"""


def _env(s3, cache: Path) -> dict[str, str]:
    """A process on its own "machine": its own spool / mirror folder."""
    return {**os.environ, **s3.env, "COLLAPSEWATCH_CACHE": str(cache), "PYTHONPATH": str(ROOT)}


@pytest.mark.slow  # 45-60 s on the shared 2-core machine: three processes importing torch, a live S3 server
def test_two_writer_machines_a_reader_and_a_sigkill(s3, url, tmp_path):
    StoreWriter(url, "bootstrap").flush("finished")  # the store exists before the reader starts
    # rank 1 sleeps 0.2 s a step: it is still running when its "flushed 14" line is read, however loaded the machine
    # rank 0 writes 20 steps (5 compactions), rank 1 is killed mid-run of its 40
    writers = [subprocess.Popen([sys.executable, str(ROOT / "tests/store/writer_proc.py"), url, "ddp", str(r), "2",
                                 ("20", "40")[r], ("0.05", "0.2")[r], "4"], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                                env=_env(s3, tmp_path / f"machine{r}")) for r in range(2)]
    stop = tmp_path / "stop"
    reader = subprocess.Popen([sys.executable, "-c", READER, url, str(stop)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_env(s3, tmp_path / "reader"))
    flushed = -1
    for line in writers[1].stdout:  # kill rank 1 once it has flushed step 14 (mid-run, compacting live)
        if line.startswith("flushed"):
            flushed = int(line.split()[1])
            if flushed >= 14:
                writers[1].send_signal(signal.SIGKILL)
                break
    assert writers[0].wait(timeout=120) == 0 and writers[1].wait(timeout=60) == -signal.SIGKILL
    stop.touch()
    out, err = reader.communicate(timeout=120)
    errors, reads, half, monotone = map(int, out.split())
    assert errors == 0, err
    assert reads > 3 and half == 0 and monotone == 1  # never half a flush; never a step counted then lost
    con = connect(url)
    steps = dict(con.execute("SELECT rank, list(DISTINCT step ORDER BY step) FROM step_metrics WHERE run = 'ddp' "
                             "GROUP BY rank").fetchall())
    assert steps[0] == list(range(20))
    # rank 1 had flushed step 14 (Monitor.flush returns once the flush is published): 0..14 are all there,
    # and nothing it published after is half there (contiguous from 0)
    assert steps[1][:15] == list(range(15)) and steps[1] == list(range(len(steps[1])))
    n_seq = con.execute("SELECT rank, count(*) FROM sequences WHERE run = 'ddp' GROUP BY rank ORDER BY rank").fetchall()
    assert n_seq[0] == (0, 20 * 4) and n_seq[1] == (1, len(steps[1]) * 4)  # B = 4 sequences per step


def test_mirror_reads_run_rows_replaced_in_place(url):
    w = StoreWriter(url, "hb", heartbeat_s=0.0)
    w.flush("running")
    assert Store(url).query("SELECT status FROM run_ranks")["status"].tolist() == ["running"]
    w.flush("finished")  # the run row is PUT again under the same key: no rename on an object store
    s = Store(url)
    assert s.query("SELECT status FROM run_ranks")["status"].tolist() == ["finished"]
    assert pq.read_table(s.root / "hb" / "runs" / "r0.parquet").num_rows == 1


def test_a_run_name_is_not_reused_from_another_machine(url, tmp_path, monkeypatch):
    from collapsewatch.runlock import RunExistsError

    with Monitor(url, run="taken", detectors=False) as mon:
        mon.observe(random_batch(B=2, T=4), step=0)
    monkeypatch.setenv("COLLAPSEWATCH_CACHE", str(tmp_path / "other-machine"))  # an empty spool
    with pytest.raises(RunExistsError, match=f"already exists in store '{url}'"):
        Monitor(url, run="taken", detectors=False)
    with Monitor(url, run="taken", detectors=False, resume=True) as mon:  # asked to resume: it goes on
        mon.observe(random_batch(B=2, T=4), step=1)
    assert connect(url).execute("SELECT list(step ORDER BY step) FROM steps").fetchone()[0] == [0, 1]


def test_the_dashboard_serves_a_url(url):
    """Each page's layout (Dash Pages' routing callback, as the browser calls it) renders from the mirror."""
    from collapsewatch.dashboard import create_app

    with Monitor(url, run="d", detectors=False) as mon:
        for step in range(3):
            mon.observe(random_batch(B=4, T=8, seed=step), step=step)
    app = create_app(url)
    client = app.server.test_client()
    assert_pages_render(client, ("/", "/run/d", "/tokens/d", "/compare", "/sql"))


def test_an_endpoint_outage_costs_nothing_once_it_is_back(tmp_path, monkeypatch, caplog):
    """The server stops mid-run: the flush fails (counted, reported once by URL), its segment stays in the spool,
    and the next flushes only spool (the endpoint's pause, ``upload_retry_s``: a dead endpoint must not cost every
    flush its timeouts); once a server answers on the same address again, the final flush publishes them all."""
    from moto.server import ThreadedMotoServer

    server = s3server.start()  # its own server: this test stops it
    server.create_bucket("outage")
    for k, v in server.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("COLLAPSEWATCH_CACHE", str(tmp_path / "cache"))
    w = StoreWriter("s3://outage/run", "o", compact_every=0)
    rows = lambda step: {"run": ["o"], "rank": [0], "step": [step], "key": ["lr"], "value": [float(step)]}  # noqa: E731
    w.append("scalars", rows(0))
    assert w.flush()
    server.stop()
    w.append("scalars", rows(1))
    assert not w.flush() and w.write_errors == 1  # the segment's upload; the run row waits out the pause
    assert "cannot write to store s3://outage/run (" in caplog.text
    w.append("scalars", rows(2))
    assert not w.flush() and w.write_errors == 1 and w.unpublished() == 2  # in the pause: spooled, not tried
    again = ThreadedMotoServer(ip_address="127.0.0.1", port=int(server.endpoint.rsplit(":", 1)[1]), verbose=False)
    again.start()  # moto keeps its buckets in this process: the same store is back
    try:
        w.append("scalars", rows(3))
        assert w.flush("finished") and w.write_errors == 1  # a final flush always tries: all four published
        assert connect("s3://outage/run").execute("SELECT list(step ORDER BY step) FROM scalars").fetchone() == (
            [0, 1, 2, 3],)
        mon = Monitor("s3://outage/run", run="late", detectors=False, compact_every=0)
        mon.observe(random_batch(B=2, T=4), step=0)
    finally:
        again.stop()
    mon.close()  # the endpoint is gone at the end of the run: no exception, the spool keeps the flush
    assert "1 flush(es) of run late could not be uploaded" in caplog.text
    assert len(list((tmp_path / "cache" / "spool").rglob("late/step_metrics/r0-*.parquet"))) == 1


@pytest.mark.slow  # about 30 s here: a dashboard server and a writer process against the S3 server
def test_a_dashboard_on_a_url_answers_no_500_while_a_run_writes_and_compacts(s3, url, tmp_path):
    """tests/store/test_dashboard_live.py on an object store: the real dashboard server (its own mirror) polled on
    16 URLs while a writer on another "machine" publishes 16 flushes and compacts every 2 of them (8 compactions; each
    step costs ~1 CPU s between the S3 server and the dashboard's mirror syncs), then once more at the end."""
    from datetime import datetime, timezone

    from collapsewatch.demo import dashboard_log, start_dashboard
    from tests.ports import free_port
    from tests.store.test_dashboard_live import URLS, _page

    quiet = StoreWriter(url, "quiet", heartbeat_s=3600)  # step rows, no token rows
    quiet.append("step_metrics", {"run": ["quiet"], "rank": [0], "step": [0], "n_seqs": [4],
                                  "ts": [datetime.now(timezone.utc)]})
    quiet.flush(status="finished")
    writer = subprocess.Popen([sys.executable, str(ROOT / "tests/store/writer_proc.py"), url, "live", "0", "1", "16",
                               "0.02", "2"], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env=_env(s3, tmp_path / "machine0"))
    port = free_port()
    server = start_dashboard(url, port)  # inherits this process's environment: the endpoint, its own cache
    try:
        statuses: list[tuple[str, int]] = []
        while writer.poll() is None:
            statuses += [(u, _page(port, u)) for u in URLS]
        statuses += [(u, _page(port, u)) for u in URLS]
        assert writer.returncode == 0
        errors = [(u, s) for u, s in statuses if s != 200]
        assert errors == [] and len(statuses) >= 2 * len(URLS), dashboard_log(server, 8000, problems=True)  # its traceback
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_an_object_re_put_after_listing_is_fetched_whole_at_the_next_sync(url, tmp_path):
    from collapsewatch.store import mirror as mirrors

    remote = parse_url(url)
    remote.put_bytes("r/runs/r0.parquet", b"x" * 100)
    ((size, mtime),) = remote.list("r/").values()
    remote.put_bytes("r/runs/r0.parquet", b"y" * 150)  # re-PUT between the listing and the read
    mirror = tmp_path / "mirror"
    assert mirrors._stage(remote, mirror, "r/runs/r0.parquet", size, mtime) is None  # 150 bytes read, 100 listed
    assert not (mirror / "r" / "runs" / "r0.parquet").exists()
    # the next listing has the new size: fetched whole (a bad file, kept to be named); want: a reader read r's rows
    mirrors.sync(remote, mirror, want={"r/runs"})
    assert (mirror / "r" / "runs" / "r0.parquet").read_bytes() == b"y" * 150


@pytest.mark.parametrize("read", ["steps", "compare", "summary"])
def test_a_run_scan_lists_the_files_its_own_query_synced(url, monkeypatch, read):
    """A query over one run's folder (``Store.run_view``) lists its files after the sync that query starts with.
    Here the writer's second flush merges the first into a compact segment and deletes it from the bucket; the
    reader's mirror still holds that first segment until its next sync, which every query starts with (SYNC_S 0).
    A scan listed before the query's sync names the deleted segment, and every retry reads that same list: the
    dashboard's 500 under load, when a sync fell between a page's listing and its query."""
    from datetime import datetime, timezone

    from collapsewatch.offline import run_steps
    from collapsewatch.store import queries

    w = StoreWriter(url, "c", compact_every=2)
    reads = {"steps": lambda s: run_steps(s, "c")["step"].tolist(),
             "compare": lambda s: queries.compare_rows(s, ["c"], ["n_seqs"])["step"].tolist(),
             "summary": lambda s: int(queries.run_summary(s, "c")["n_steps"])}

    def flush(step: int) -> None:
        w.append("step_metrics", {"run": ["c"], "rank": [0], "step": [step], "n_seqs": [4],
                                  "ts": [datetime.now(timezone.utc)]})
        w.flush("running")

    flush(0)
    s = Store(url)
    first = reads[read](s)  # the mirror now holds flush 1's segment of the run
    flush(1)  # two flush segments of step_metrics: merged into one, flush 1's deleted from the bucket
    assert not any("/step_metrics/r0-000001-" in k for k in parse_url(url).list())
    monkeypatch.setattr(queries, "SYNC_S", 0.0)
    # before: step 0 (flush 1); after: steps 0 and 1, read from the compact segment alone
    assert (first, reads[read](s)) == {"steps": ([0], [0, 1]), "compare": ([0], [0, 1]), "summary": (1, 2)}[read]
