"""lab/public/from_mirror.py: raw files taken from git snapshots of the sources' repositories, sha256-checked.

Each test builds a real git repository (the `git` command) with known files, writes a sources.csv naming them, and
checks what lands in raw/. Expected sha256 values are computed here from the bytes the test wrote."""

from __future__ import annotations

import csv
import gzip
import hashlib
import importlib.util
import subprocess
from pathlib import Path

import pytest

PUBLIC = Path(__file__).resolve().parents[2] / "lab" / "public"
_spec = importlib.util.spec_from_file_location("from_mirror", PUBLIC / "from_mirror.py")
from_mirror = importlib.util.module_from_spec(_spec)
assert _spec.loader is not None
_spec.loader.exec_module(from_mirror)

FIELDS = ["run", "file", "repo", "path", "commit", "sha256"]


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "HOME": str(repo), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def _commit(repo: Path, files: dict[str, bytes]) -> str:
    for rel, data in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "c")
    return _git(repo, "rev-parse", "HEAD")


def _sources(path: Path, rows: list[dict[str, str]]) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    return path


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def mirrors(tmp_path: Path) -> Path:
    repo = tmp_path / "mirrors" / "alice+runs" / "repo"  # a snapshot with a work tree, as fetch can bring
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    return tmp_path / "mirrors"


def test_a_file_at_its_commit_is_written_and_a_gz_name_is_compressed(mirrors: Path, tmp_path: Path) -> None:
    repo = mirrors / "alice+runs" / "repo"
    first = b'{"step": 1, "reward": 0.5}\n'
    c1 = _commit(repo, {"logs/a.jsonl": first})
    _commit(repo, {"logs/a.jsonl": b"changed later\n"})  # the recorded commit, not the newest, is what is taken
    src = _sources(tmp_path / "sources.csv", [
        {"run": "a", "file": "a.jsonl", "repo": "alice/runs", "path": "logs/a.jsonl", "commit": c1,
         "sha256": _sha(first)},
        {"run": "a-gz", "file": "a2.jsonl.gz", "repo": "alice/runs", "path": "logs/a.jsonl", "commit": c1,
         "sha256": _sha(first)},
    ])
    raw = tmp_path / "raw"
    assert from_mirror.main([str(mirrors), "--sources", str(src), "--raw", str(raw)]) == 0
    assert (raw / "a.jsonl").read_bytes() == first
    assert gzip.decompress((raw / "a2.jsonl.gz").read_bytes()) == first  # the sha256 is of the content


def test_a_file_the_repository_holds_gzipped_is_recorded_by_its_content(mirrors: Path, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # the repository commits logs/b.log.gz; sources.csv records the sha256 of the log inside it (score.sh checks
    # `gzip -dc raw/FILE` for a .gz name, `cat` otherwise): written as b.log (plain) and as b2.log.gz (gzipped again)
    repo = mirrors / "alice+runs" / "repo"
    log = b"step:1 - critic/score/mean:0.5\n"
    c1 = _commit(repo, {"logs/b.log.gz": gzip.compress(log, mtime=0), "logs/not.gz": b"plain"})
    src = _sources(tmp_path / "sources.csv", [
        {"run": "b", "file": "b.log", "repo": "alice/runs", "path": "logs/b.log.gz (gzipped; its content's sha256)",
         "commit": c1, "sha256": _sha(log)},
        {"run": "b2", "file": "b2.log.gz", "repo": "alice/runs", "path": "logs/b.log.gz", "commit": c1,
         "sha256": _sha(log)},
        {"run": "c", "file": "c.log", "repo": "alice/runs", "path": "logs/not.gz", "commit": c1, "sha256": _sha(b"x")},
    ])
    raw = tmp_path / "raw"
    from_mirror.main([str(mirrors), "--sources", str(src), "--raw", str(raw)])
    assert "2 written, 0 already there, 1 not" in (out := capsys.readouterr().out) and "c: logs/not.gz is not gzip" in out
    assert (raw / "b.log").read_bytes() == log and gzip.decompress((raw / "b2.log.gz").read_bytes()) == log
    assert not (raw / "c.log").exists()


def test_a_wrong_sha_a_missing_snapshot_or_path_writes_nothing(mirrors: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    repo = mirrors / "alice+runs" / "repo"
    c1 = _commit(repo, {"a.csv": b"step,reward\n1,0.5\n"})
    src = _sources(tmp_path / "sources.csv", [
        {"run": "bad-sha", "file": "a.csv", "repo": "alice/runs", "path": "a.csv", "commit": c1, "sha256": "0" * 64},
        {"run": "no-repo", "file": "b.csv", "repo": "bob/other", "path": "a.csv", "commit": c1, "sha256": "0" * 64},
        {"run": "no-path", "file": "c.csv", "repo": "alice/runs", "path": "gone.csv", "commit": c1,
         "sha256": "0" * 64},
    ])
    raw = tmp_path / "raw"
    from_mirror.main([str(mirrors), "--sources", str(src), "--raw", str(raw)])
    assert list(raw.iterdir()) == []
    out = capsys.readouterr().out
    assert "0 written, 0 already there, 3 not" in out
    assert "bad-sha: sha256" in out and "no-repo: no snapshot of bob/other" in out and "no-path: gone.csv" in out


def test_a_file_already_in_raw_is_left_alone(mirrors: Path, tmp_path: Path) -> None:
    repo = mirrors / "alice+runs" / "repo"
    data = b"x\n"
    c1 = _commit(repo, {"a.csv": data})
    src = _sources(tmp_path / "sources.csv", [
        {"run": "a", "file": "a.csv", "repo": "alice/runs", "path": "a.csv", "commit": c1, "sha256": _sha(data)}])
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.csv").write_bytes(b"mine\n")
    from_mirror.main([str(mirrors), "--sources", str(src), "--raw", str(raw)])
    assert (raw / "a.csv").read_bytes() == b"mine\n"


def test_folder_entries_hash_their_sorted_listing_as_score_sh_does(mirrors: Path, tmp_path: Path) -> None:
    repo = mirrors / "alice+runs" / "repo"
    files = {"exp/4.7/b.csv": b"b\n", "exp/4.7/a.csv": b"a\n", "exp/4.7/notes.txt": b"n\n",
             "logs/pre.log": b"step:1\n", "logs/post.log": b"step:2\n", "tb/x/ev": b"1", "tb/y/ev": b"2"}
    c1 = _commit(repo, files)

    # score.sh: (cd raw && find FOLDER -type f | LC_ALL=C sort | xargs sha256sum | sha256sum) — by hand:
    def listing(pairs: list[tuple[str, bytes]]) -> str:
        return _sha("".join(f"{_sha(d)}  {name}\n" for name, d in sorted(pairs)).encode())

    csvs = listing([("f1/a.csv", b"a\n"), ("f1/b.csv", b"b\n")])  # "all *.csv": notes.txt left out
    pair = listing([("f2/post.log", b"step:2\n"), ("f2/pre.log", b"step:1\n")])  # "a + b": each keeps its name
    brace = listing([("f3/x/ev", b"1"), ("f3/y/ev", b"2")])  # "dir/{x,y}": each folder keeps its name
    src = _sources(tmp_path / "sources.csv", [
        {"run": "r1", "file": "f1/", "repo": "alice/runs", "path": "exp/4.7/ (all *.csv; experiment_name e1)",
         "commit": c1, "sha256": csvs},
        {"run": "r1b", "file": "f1/", "repo": "alice/runs", "path": "exp/4.7/ (all *.csv; experiment_name e2)",
         "commit": c1, "sha256": csvs},
        {"run": "r2", "file": "f2/", "repo": "alice/runs", "path": "logs/pre.log + logs/post.log", "commit": c1,
         "sha256": pair},
        {"run": "r3", "file": "f3/", "repo": "alice/runs", "path": "tb/{x,y}/", "commit": c1, "sha256": brace},
    ])
    raw = tmp_path / "raw"
    from_mirror.main([str(mirrors), "--sources", str(src), "--raw", str(raw)])
    assert sorted(p.relative_to(raw).as_posix() for p in raw.rglob("*") if p.is_file()) == [
        "f1/a.csv", "f1/b.csv", "f2/post.log", "f2/pre.log", "f3/x/ev", "f3/y/ev"]
    # the same listing through score.sh's own shell pipeline
    got = subprocess.run("find f1 -type f | LC_ALL=C sort | xargs -d '\\n' sha256sum | sha256sum | cut -d' ' -f1",
                         shell=True, cwd=raw, capture_output=True, text=True, check=True).stdout.strip()
    assert got == csvs


def test_a_folder_inside_a_committed_archive(mirrors: Path, tmp_path: Path) -> None:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in (("tb/run1/ev.0", b"one"), ("tb/run1/sub/ev.1", b"two"), ("tb/run2/ev.0", b"other")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    c1 = _commit(mirrors / "alice+runs" / "repo", {"out/tb.tar.gz": buf.getvalue()})
    # run1's two files, paths below tb/run1/ kept (run2 left out) — the listing by hand:
    want = _sha("".join(f"{_sha(d)}  {n}\n" for n, d in sorted([("r.tb/ev.0", b"one"), ("r.tb/sub/ev.1", b"two")]))
                .encode())
    src = _sources(tmp_path / "sources.csv", [
        {"run": "r", "file": "r.tb/", "repo": "alice/runs", "path": "out/tb.tar.gz (member tb/run1/)", "commit": c1,
         "sha256": want}])
    raw = tmp_path / "raw"
    from_mirror.main([str(mirrors), "--sources", str(src), "--raw", str(raw)])
    assert (raw / "r.tb" / "ev.0").read_bytes() == b"one" and (raw / "r.tb" / "sub" / "ev.1").read_bytes() == b"two"
    assert not (raw / "r.tb" / "ev.1").exists()


def test_one_file_inside_a_committed_zip(mirrors: Path, tmp_path: Path) -> None:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("sub/run1/metrics.jsonl", b'{"step": 0}\n')
        z.writestr("sub/run2/metrics.jsonl", b"other")
    c1 = _commit(mirrors / "alice+runs" / "repo", {"out/bundle.zip": buf.getvalue()})
    # the member's own bytes are what is recorded and written (not the archive's)
    rows = [{"run": "r", "file": "r.jsonl", "repo": "alice/runs", "path": "out/bundle.zip (member sub/run1/metrics.jsonl)",
             "commit": c1, "sha256": _sha(b'{"step": 0}\n')},
            {"run": "q", "file": "q.jsonl", "repo": "alice/runs", "path": "out/bundle.zip (member sub/run9/metrics.jsonl)",
             "commit": c1, "sha256": _sha(b"other")}]
    raw = tmp_path / "raw"
    from_mirror.main([str(mirrors), "--sources", str(_sources(tmp_path / "sources.csv", rows)), "--raw", str(raw)])
    assert (raw / "r.jsonl").read_bytes() == b'{"step": 0}\n'
    assert not (raw / "q.jsonl").exists()  # no such member: nothing written


def test_mirrors_not_a_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        from_mirror.main([str(tmp_path / "nope")])
    assert "mirrors:" in capsys.readouterr().err


def _remote(tmp_path: Path, files: list[dict[str, bytes]]) -> tuple[str, list[str]]:
    """A repository standing for GitHub's alice/runs (``--fetch-url`` TEMPLATE/{repo}): one commit per dict."""
    repo = tmp_path / "remotes" / "alice" / "runs"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    return str(tmp_path / "remotes" / "{repo}"), [_commit(repo, f) for f in files]


def test_fetch_brings_a_commit_no_snapshot_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the repository has no snapshot: --fetch makes mirrors/alice+runs/repo (bare) and fetches the recorded commit,
    # the first of two (not the tip: a run's file is often changed later), then takes the file as from a snapshot
    old = b'{"step": 1, "reward": 0.5}\n'
    url, (c1, _) = _remote(tmp_path, [{"logs/a.jsonl": old}, {"logs/a.jsonl": b"changed later\n"}])
    src = _sources(tmp_path / "sources.csv", [
        {"run": "a", "file": "a.jsonl", "repo": "alice/runs", "path": "logs/a.jsonl", "commit": c1,
         "sha256": _sha(old)},
        {"run": "a2", "file": "a2.jsonl", "repo": "alice/runs", "path": "logs/a.jsonl", "commit": c1,
         "sha256": _sha(old)},  # the same commit again: fetched once, read from the snapshot the first made
    ])
    raw, mirrors = tmp_path / "raw", tmp_path / "mirrors"  # the folder need not exist yet
    # without --fetch: listed, nothing written
    mirrors.mkdir()
    from_mirror.main([str(mirrors), "--sources", str(src), "--raw", str(raw)])
    assert "a: no snapshot of alice/runs" in capsys.readouterr().out and not (raw / "a.jsonl").exists()
    assert from_mirror.main([str(mirrors), "--sources", str(src), "--raw", str(raw), "--fetch",
                             "--fetch-url", url]) == 0
    assert "2 written, 0 already there, 0 not" in capsys.readouterr().out
    assert (raw / "a.jsonl").read_bytes() == old and (raw / "a2.jsonl").read_bytes() == old
    assert (mirrors / "alice+runs" / "repo" / "HEAD").is_file()  # a bare repository, where score.sh's docs say


def test_fetch_fills_in_a_snapshot_that_lacks_the_commit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a snapshot of another repository's history under alice+runs (it lacks the commit): the commit is fetched into it
    snap = tmp_path / "mirrors" / "alice+runs" / "repo"
    snap.mkdir(parents=True)
    _git(snap, "init", "-q")
    _commit(snap, {"other.txt": b"another history\n"})
    data = b"step,reward\n1,0.25\n"
    url, (c1,) = _remote(tmp_path, [{"m.csv": data}])
    src = _sources(tmp_path / "sources.csv", [
        {"run": "m", "file": "m.csv", "repo": "alice/runs", "path": "m.csv", "commit": c1, "sha256": _sha(data)}])
    raw = tmp_path / "raw"
    from_mirror.main([str(tmp_path / "mirrors"), "--sources", str(src), "--raw", str(raw), "--fetch",
                      "--fetch-url", url])
    assert "1 written" in capsys.readouterr().out and (raw / "m.csv").read_bytes() == data


def test_a_commit_the_repository_lacks_is_listed_with_gits_reason(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    url, _ = _remote(tmp_path, [{"a.csv": b"x\n"}])
    gone = "0123456789abcdef0123456789abcdef01234567"  # no such commit (force-pushed away, say)
    src = _sources(tmp_path / "sources.csv", [
        {"run": "gone", "file": "a.csv", "repo": "alice/runs", "path": "a.csv", "commit": gone, "sha256": "0" * 64},
        {"run": "nowhere", "file": "b.csv", "repo": "bob/none", "path": "a.csv", "commit": gone, "sha256": "0" * 64}])
    raw = tmp_path / "raw"
    assert from_mirror.main([str(tmp_path / "m"), "--sources", str(src), "--raw", str(raw), "--fetch",
                             "--fetch-url", url]) == 0
    out = capsys.readouterr().out
    assert "0 written, 0 already there, 2 not" in out
    assert f"gone: no snapshot of alice/runs; git fetch {url.format(repo='alice/runs')} 0123456789ab: " in out
    assert "nowhere: no snapshot of bob/none; git fetch" in out
    assert list(raw.iterdir()) == []  # nothing written
    assert list((tmp_path / "m").iterdir()) == []  # and no empty repository left to read as a snapshot next time


def test_a_fetch_url_without_repo_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        from_mirror.main([str(tmp_path), "--fetch", "--fetch-url", "https://example.org/x.git"])
    assert "--fetch-url: 'https://example.org/x.git' holds no {repo}" in capsys.readouterr().err
