"""Fill lab/public/raw/ from git snapshots of the sources' repositories.

score.sh reads each run's raw file from raw/; files not committed here (no licence to redistribute) come from the
repository, path and commit that sources.csv records. This script takes them from local git clones or bare snapshots
(one folder per repository, named ``owner+name``, holding a git directory or a clone) and checks each file's sha256
against sources.csv before it writes it:

    python lab/public/from_mirror.py MIRRORS          (MIRRORS: a folder of owner+name/ git snapshots)

A file ending in .gz is written gzip-compressed (the recorded sha256 is of its content); a file the repository holds
gzipped (its ``path`` ends in .gz) is read decompressed, its sha256 that of its content, as score.sh checks it. A folder entry (``file`` ends
in /) takes every file under the path's folder whose name matches the pattern in its note (``all *.csv``) and checks
the sha256 of their sorted ``sha256sum`` listing, as score.sh does; ``A.tar.gz (member DIR/)`` takes DIR's files from
inside a committed archive, and a file entry's ``A.zip (member DIR/FILE)`` one file from inside a committed zip (its
sha256 that of the member). Runs whose repository has no snapshot, whose commit the snapshot lacks or whose sha256
differs are listed at the end and left alone; nothing already in raw/ is touched.

With ``--fetch``, a run whose repository has no snapshot under MIRRORS, or whose snapshot lacks the file at the
recorded commit, has that commit fetched from GitHub (``git fetch --depth 1 URL COMMIT`` into
``MIRRORS/owner+name/repo``, a bare repository made where there is none) and is taken from it, sha256-checked as
the rest. A clone with network access restores the corpus in one command:

    python lab/public/from_mirror.py --fetch MIRRORS     (URL: https://github.com/OWNER/NAME.git; --fetch-url TEMPLATE
                                                         with {repo} for another host or a local copy)
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import gzip
import hashlib
import io
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
GITHUB = "https://github.com/{repo}.git"
FETCH_TIMEOUT_S = 600


def git_dir(mirrors: Path, repo: str) -> Path | None:
    """The git directory of ``repo``'s snapshot under ``mirrors``, or None where there is none."""
    base = mirrors / repo.replace("/", "+")
    for cand in (base / "repo" / ".git", base / "repo", base / ".git", base):
        if (cand / "HEAD").is_file() and (cand / "objects").is_dir():
            return cand
    return None


def fetch_commit(mirrors: Path, repo: str, commit: str, url_template: str) -> tuple[Path | None, str]:
    """Fetch ``commit`` of ``repo`` (from ``url_template`` with ``{repo}``) into its snapshot under ``mirrors``, or
    into a new bare repository ``mirrors/owner+name/repo`` where there is none: (its git directory, "") or
    (None, why not)."""
    git, new = git_dir(mirrors, repo), None
    if git is None:  # a new bare repository, removed again if nothing comes into it
        new = mirrors / repo.replace("/", "+")
        git = new / "repo"
        git.mkdir(parents=True, exist_ok=True)
        made = subprocess.run(["git", "init", "-q", "--bare", str(git)], capture_output=True, text=True)
        if made.returncode != 0:
            shutil.rmtree(new, ignore_errors=True)
            return None, f"git init {git}: {made.stderr.strip()}"
    url = url_template.format(repo=repo)
    try:
        done = subprocess.run(["git", "--git-dir", str(git), "fetch", "-q", "--depth", "1", url, commit],
                              capture_output=True, text=True, timeout=FETCH_TIMEOUT_S)
        lines = done.stderr.strip().splitlines()
        why = "" if done.returncode == 0 else lines[-1] if lines else f"exit {done.returncode}"
    except subprocess.TimeoutExpired:
        why = f"no answer in {FETCH_TIMEOUT_S} s"
    if why:
        if new is not None:
            shutil.rmtree(new, ignore_errors=True)
        return None, f"git fetch {url} {commit[:12]}: {why}"
    return git, ""


def show(git: Path, commit: str, path: str) -> bytes | None:
    """The bytes of ``path`` at ``commit``, or None where the snapshot lacks either."""
    done = subprocess.run(["git", "--git-dir", str(git), "show", f"{commit}:{path}"], capture_output=True)
    return done.stdout if done.returncode == 0 else None


def listing(git: Path, commit: str, folder: str) -> list[str] | None:
    """Paths of the files under ``folder`` at ``commit``."""
    done = subprocess.run(["git", "--git-dir", str(git), "ls-tree", "-r", "--name-only", commit, "--", folder],
                          capture_output=True, text=True)
    return done.stdout.splitlines() if done.returncode == 0 else None


def spec_paths(spec: str) -> list[str]:
    """The repository paths a folder entry's ``path`` names: ``a + b`` (files), ``dir/{x,y}`` (folders), or one
    folder; a note in brackets after it is not part of the path."""
    spec = spec.split(" (")[0].strip()
    if " + " in spec:
        return [p.strip().rstrip("/") for p in spec.split(" + ")]
    brace = re.fullmatch(r"(.*)\{([^}]*)\}(.*)", spec)
    if brace:
        return [(brace[1] + part + brace[3]).rstrip("/") for part in brace[2].split(",")]
    return [spec.rstrip("/")]


def tar_member(git: Path, row: dict[str, str], raw: Path, archive: str, member: str) -> str:
    """A folder entry taken from inside a committed archive (``path`` ``A.tar.gz (member DIR/)``): DIR's files, with
    their paths below DIR, into ``raw/<file>``."""
    data = show(git, row["commit"], archive)
    if data is None:
        return f"{archive} at {row['commit'][:12]} not in the snapshot"
    blobs: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for info in tar.getmembers():
            name = info.name.removeprefix("./")
            if info.isfile() and name.startswith(member + "/"):
                f = tar.extractfile(info)
                assert f is not None
                blobs[row["file"].rstrip("/") + name[len(member):]] = f.read()
    if not blobs:
        return f"{archive} has no member under {member}/"
    return write_listing(row, raw, blobs)


def write_listing(row: dict[str, str], raw: Path, blobs: dict[str, bytes]) -> str:
    """Check the sha256 of the files' sorted listing against the row's, then write them; "" when written."""
    # score.sh: find FOLDER -type f | LC_ALL=C sort | xargs sha256sum | sha256sum
    text = "".join(f"{hashlib.sha256(blobs[rel]).hexdigest()}  {rel}\n" for rel in sorted(blobs, key=str.encode))
    got = hashlib.sha256(text.encode()).hexdigest()
    if got != row["sha256"]:
        return f"sha256 of the folder listing {got[:12]} is not the recorded {row['sha256'][:12]}"
    for rel, data in blobs.items():
        out = raw / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
    return ""


def folder_entry(git: Path, row: dict[str, str], raw: Path) -> str:
    """Write a folder entry's files to ``raw/<file>``; returns "" when written, else why not.

    One folder named: its files keep their paths below it. Several paths named: each file (or folder) keeps its last
    name below ``raw/<file>``."""
    path = row["path"]
    member = re.fullmatch(r"(\S+\.(?:tar\.gz|tgz|tar)) \(member ([^)]+?)/?\)", path.strip())
    if member:
        return tar_member(git, row, raw, member[1], member[2])
    note = path.partition(" (")[2]
    pattern = "*"
    if note.startswith("all "):
        pattern = note[4:].split(";")[0].split(")")[0].strip()
    paths = spec_paths(path)
    blobs: dict[str, bytes] = {}
    for src in paths:
        names = listing(git, row["commit"], src)
        if not names:
            return f"commit {row['commit'][:12]} or {src} not in the snapshot"
        names = [n for n in names if fnmatch.fnmatch(n.rsplit("/", 1)[-1], pattern)]
        keep = src if len(paths) == 1 else src.rsplit("/", 1)[0]  # a list keeps each path's last name
        for n in names:
            data = show(git, row["commit"], n)
            if data is None:
                return f"{n} not readable"
            blobs[row["file"].rstrip("/") + n[len(keep):]] = data
    return write_listing(row, raw, blobs)


def file_entry(git: Path, row: dict[str, str], raw: Path) -> str:
    """Write one file to ``raw/<file>``; returns "" when written, else why not (a note in brackets after the path is
    not part of it)."""
    path = row["path"].split(" (")[0].strip()
    data = show(git, row["commit"], path)
    if data is None:  # a snapshot may hold only the newest commit: the file there is taken if its sha256 matches
        data = show(git, "HEAD", path)
    if data is None:
        return f"{path} at {row['commit'][:12]} (or the snapshot's newest commit) not in the snapshot"
    member = re.fullmatch(r"\S+\.zip \(member ([^)]+)\)", row["path"].strip())
    if member:  # one file inside a committed zip archive: ``A.zip (member DIR/FILE)``
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                data = archive.read(member[1])
        except (zipfile.BadZipFile, KeyError) as e:
            return f"{path}: no member {member[1]} ({e})"
    if path.endswith(".gz"):  # a gzipped file in the repository: its content is what is recorded
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            return f"{path} is not gzip: {e}"
    got = hashlib.sha256(data).hexdigest()
    if got != row["sha256"]:
        return f"sha256 {got[:12]} is not the recorded {row['sha256'][:12]}"
    out = raw / row["file"]
    out.write_bytes(gzip.compress(data, mtime=0) if row["file"].endswith(".gz") else data)
    return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mirrors", type=Path, help="folder of owner+name/ git snapshots")
    ap.add_argument("--sources", type=Path, default=HERE / "sources.csv")
    ap.add_argument("--raw", type=Path, default=HERE / "raw")
    ap.add_argument("--fetch", action="store_true",
                    help="fetch a commit the snapshots lack from its repository (network; module doc)")
    ap.add_argument("--fetch-url", default=GITHUB, help="URL of a repository, {repo} standing for owner/name "
                    f"(default {GITHUB})")
    args = ap.parse_args(argv)
    if args.fetch:
        if "{repo}" not in args.fetch_url:
            ap.error(f"--fetch-url: {args.fetch_url!r} holds no {{repo}}")
        args.mirrors.mkdir(parents=True, exist_ok=True)
    if not args.mirrors.is_dir():
        ap.error(f"mirrors: {args.mirrors} is not a folder")
    with open(args.sources, newline="") as f:
        rows = list(csv.DictReader(f))
    args.raw.mkdir(parents=True, exist_ok=True)
    written, skipped, failed = 0, 0, []
    done_folders: set[str] = set()
    fetched: set[tuple[str, str]] = set()  # (repo, commit) fetched once, whatever came of it
    for row in rows:
        target = args.raw / row["file"]
        if target.exists() or row["file"] in done_folders:
            skipped += 1
            continue
        entry = folder_entry if row["file"].endswith("/") else file_entry
        git = git_dir(args.mirrors, row["repo"])
        why = f"no snapshot of {row['repo']}" if git is None else entry(git, row, args.raw)
        if why and args.fetch and (row["repo"], row["commit"]) not in fetched:
            fetched.add((row["repo"], row["commit"]))
            git, why_not = fetch_commit(args.mirrors, row["repo"], row["commit"], args.fetch_url)
            why = f"{why}; {why_not}" if git is None else entry(git, row, args.raw)
        if why:
            failed.append((row["run"], why))
        else:
            written += 1
            if row["file"].endswith("/"):
                done_folders.add(row["file"])
    print(f"{written} written, {skipped} already there, {len(failed)} not")
    for run, why in failed:
        print(f"  {run}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
