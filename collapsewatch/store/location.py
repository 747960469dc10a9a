"""Where a store lives: a folder (local disk or a shared filesystem) or an object-store URL ``s3://bucket/prefix``.

The one filesystem abstraction of the store. Everything else reads and writes plain local files; this module
moves them to and from the object store (pyarrow's built-in ``S3FileSystem``: no DuckDB extension, nothing
downloaded at run time) and owns the **publish rule** that stands in for the atomic rename object stores lack:

* a writer writes each segment once, under its final name ``<run>/<table>/r<rank>-<flush>-<uid>.parquet``, and
  after every segment of that flush is uploaded it writes the flush's marker ``<run>/_published/r<rank>-<flush>-
  <uid>`` (last; like prime-rl's STABLE marker). A flush segment without its marker is not published;
* every other object is one PUT, whole or absent (S3 replaces an object atomically): merged ``r<rank>-compact-*``
  segments (whose inputs were published), run rows ``runs/r<rank>.parquet`` (overwritten in place, never renamed),
  ``offline-r<rank>`` events, ``_schema``, a run's tokenizer;
* a reader lists the prefix and copies the published objects it reads into a local **mirror** folder (``mirror.sync``;
  which and when: ``lazy``), which every query then reads like a local store: it never sees half a flush, and an object listed but gone by the time it is
  read (compaction) makes it list again. Segments are immutable with unique names, so each is downloaded once.

Endpoint and credentials come from the environment (``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, or
the AWS SDK's own profile files when the keys are unset), never from the store path.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from ..cachedir import cache_dir

if TYPE_CHECKING:
    import pyarrow.fs as pafs

URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):/+(.*)$")  # pathlib turns "s3://b" into "s3:/b": both are URLs
FLUSH_SEGMENT = re.compile(r"^r(\d+)-(\d{6,})-([0-9a-f]{8})\.parquet$")
PUBLISHED = "_published"
QUARANTINE = "_quarantine"  # where ``collapsewatch check --quarantine`` moves bad files, out of every read
NOT_MIRRORED = (QUARANTINE, PUBLISHED)  # folders of the store or of a run that readers never need
MIRROR_SKIPS = (".duckdb",)  # a run's export: the mirror's segments hold the same rows
TABLE_KEY = b"collapsewatch.table"
"""Parquet key-value metadata of every segment this package writes: its table's name. A segment of a newer
collapsewatch may carry columns this reader's migrations do not know (an added column, e.g. 0006's events.rules);
with this stamp it is read (those columns read as they are, the known ones as usual) instead of being taken for a
foreign file and skipped (``segments.schema_problem``). Segments written before the stamp existed have none: a
reader older than a column's migration skips them as bad (docs/store.md, "Readers older than the store")."""
REPLACES_KEY = b"collapsewatch.replaces"
"""Parquet key-value metadata of a merged segment: the JSON list of the file names it replaces. Readers and
compaction skip a file that a segment beside it replaces, so a merge killed between writing the merged
segment and deleting its inputs never counts a row twice, and the next compaction finishes the deletes."""


def is_url(store: str | os.PathLike) -> bool:
    s = str(store)
    return URL.match(s) is not None and not re.match(r"^[A-Za-z]:[\\/]", s)  # not a Windows drive


@dataclass(frozen=True)
class Remote:
    """An S3-compatible bucket and prefix, with the filesystem that reaches it."""

    url: str
    bucket: str
    prefix: str
    fs: pafs.FileSystem

    @property
    def base(self) -> str:
        return f"{self.bucket}/{self.prefix}" if self.prefix else self.bucket

    def key(self, rel: str) -> str:
        return f"{self.base}/{rel}"

    def put(self, local: Path, rel: str) -> None:
        """One PUT (multipart above pyarrow's part size; completed atomically): whole or absent to readers."""
        with self.fs.open_output_stream(self.key(rel)) as out:
            out.write(local.read_bytes())

    def put_bytes(self, rel: str, data: bytes) -> None:
        with self.fs.open_output_stream(self.key(rel)) as out:
            out.write(data)

    def get(self, rel: str, local: Path, size: int | None = None) -> bool:
        """Copy one object to ``local`` (a hidden temporary name renamed into place: local readers see it whole).
        False, and nothing written, when it is not ``size`` bytes (the size listed): re-PUT since (a run row), it is
        fetched at the next sync, never installed cut short."""
        data = self._read(rel)
        if size is not None and len(data) != size:
            return False
        if rel.endswith(".parquet") and not _parquet_tail(data) and self._read(rel) != data:
            return False  # cut short by a re-PUT between the size lookup and the read (a corrupt object reads alike)
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.parent / f".{local.name}.{uuid.uuid4().hex[:8]}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, local)
        return True

    def _read(self, rel: str) -> bytes:
        with self.fs.open_input_file(self.key(rel)) as f:
            return f.read()  # one ranged GET of the whole object as sized a moment before: one version of it

    def delete(self, rel: str) -> None:
        try:
            self.fs.delete_file(self.key(rel))
        except FileNotFoundError:
            pass

    def move(self, rel: str, to_rel: str) -> None:
        self.fs.copy_file(self.key(rel), self.key(to_rel))
        self.delete(rel)

    def list(self, rel: str = "") -> dict[str, tuple[int, int]]:
        """rel path → (size, mtime ns) of every object under ``rel`` (recursive)."""
        import pyarrow.fs as pafs  # (here, not at the top: a folder store's readers never need Arrow's filesystems)

        root = self.key(rel).rstrip("/") if rel else self.base
        sel = pafs.FileSelector(root, recursive=True, allow_not_found=True)
        out = {}
        for info in self.fs.get_file_info(sel):
            if info.type == pafs.FileType.File:
                mtime = info.mtime_ns if info.mtime_ns is not None else 0
                out[info.path[len(self.base) + 1:]] = (info.size or 0, mtime)
        return out


def _parquet_tail(data: bytes) -> bool:
    """Whether ``data`` ends like a whole Parquet file: footer length, then the magic ``PAR1``."""
    return len(data) >= 12 and data[-4:] == b"PAR1" and int.from_bytes(data[-8:-4], "little") + 12 <= len(data)


def _env_endpoint() -> dict[str, str]:
    for var in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        value = os.environ.get(var)
        if value:
            u = urlparse(value)
            if u.scheme not in ("http", "https") or not u.netloc:
                raise ValueError(f"{var}={value!r} is not an http(s) endpoint URL (e.g. http://127.0.0.1:9000)")
            return {"endpoint_override": u.netloc + u.path.rstrip("/"), "scheme": u.scheme}
    return {}


def s3_filesystem() -> pafs.S3FileSystem:
    """pyarrow's S3 filesystem configured from the usual AWS environment variables (module docstring)."""
    kw: dict = _env_endpoint()
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        kw.update(access_key=key, secret_key=secret, session_token=os.environ.get("AWS_SESSION_TOKEN"))
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    import pyarrow.fs as pafs

    # explicit timeouts: a monitor must never hang a training loop on a dead endpoint
    return pafs.S3FileSystem(region=region, connect_timeout=5, request_timeout=30, **kw)


def parse_url(store: str | os.PathLike) -> Remote:
    """The bucket and prefix of ``s3://bucket/prefix``; anything that would carry credentials or an endpoint in
    the path, or another scheme, is refused with a message naming it."""
    s = str(store)
    m = URL.match(s)
    if m is None:
        raise ValueError(f"{s!r} is not a store URL")
    s = re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@", r"\1***@", s)  # named in messages: never a key typed in it
    scheme, rest = m.group(1).lower(), m.group(2)
    if scheme != "s3":
        raise ValueError(f"store URL {s!r}: scheme {scheme!r} is not supported; use a folder or s3://bucket/prefix "
                         "(any S3-compatible endpoint, set in AWS_ENDPOINT_URL)")
    if "@" in rest or "?" in rest or "#" in rest:
        raise ValueError(f"store URL {s!r}: credentials and endpoint come from the environment (AWS_ENDPOINT_URL, "
                         "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY …), never from the store path")
    bucket, _, prefix = rest.strip("/").partition("/")
    if not bucket:
        raise ValueError(f"store URL {s!r} names no bucket")
    prefix = prefix.strip("/")
    return Remote(f"s3://{bucket}/{prefix}".rstrip("/"), bucket, prefix, s3_filesystem())


def _slot(remote: Remote) -> str:
    endpoint = _env_endpoint().get("endpoint_override", "aws")
    digest = hashlib.sha1(f"{endpoint}|{remote.url}".encode()).hexdigest()[:12]
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"{remote.bucket}-{remote.prefix}")[:60] + "-" + digest


@dataclass(frozen=True)
class Location:
    """A store as this process touches it: ``local`` is the folder it reads and writes (the store itself, or for
    a URL a writer's spool / a reader's mirror), ``remote`` the object store behind it (None for a folder)."""

    local: Path
    remote: Remote | None = None
    mirror: bool = False
    """``local`` is a reader's mirror of the whole store (else a writer's spool: its own rank's files only)."""

    def rel(self, path: str | os.PathLike) -> str:
        return Path(path).relative_to(self.local).as_posix()

    def show(self, path: str | os.PathLike) -> str:
        """How to name a file of the store to a person: its URL for an object store."""
        if self.remote is None:
            return str(path)
        rel = self.rel(path)
        return self.remote.url if rel == "." else f"{self.remote.url}/{rel}"

    def push(self, path: str | os.PathLike) -> None:
        """Upload a local file of the store (no-op for a folder store: it is already in place)."""
        if self.remote is not None:
            self.remote.put(Path(path), self.rel(path))

    def remove(self, path: str | os.PathLike) -> None:
        """Delete a file of the store: the object first (readers stop seeing it), then the local copy."""
        if self.remote is not None:
            self.remote.delete(self.rel(path))
        Path(path).unlink(missing_ok=True)

    def move(self, path: str | os.PathLike, target: Path) -> None:
        if self.remote is not None:
            self.remote.move(self.rel(path), self.rel(target))
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)

    def publish(self, run: str, segments: list[str]) -> None:
        """Write the marker of the flush whose segments (``<table>/r<rank>-<flush>-<uid>.parquet``, relative to the
        run) are all uploaded; it lists them, so that a reader can tell a flush missing one (``mirror.sync``)."""
        if self.remote is not None and segments:
            self.remote.put_bytes(marker_rel(run, segments[0].rsplit("/", 1)[-1]), "\n".join(segments).encode())

    def retire(self, run: str, segment_name: str) -> None:
        """Delete the marker of a flush none of whose segments is left (all merged into compact segments)."""
        if self.remote is not None:
            self.remote.delete(marker_rel(run, segment_name))


def marker_rel(run: str, segment_name: str) -> str:
    """The marker publishing the flush a segment belongs to: ``<run>/_published/r<rank>-<flush>-<uid>``."""
    m = FLUSH_SEGMENT.match(segment_name)
    if m is None:
        raise ValueError(f"{segment_name!r} is not a flush segment name")
    return f"{run}/{PUBLISHED}/r{m.group(1)}-{m.group(2)}-{m.group(3)}"


def published(listing: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """The objects of a listing a reader may see: every flush segment whose flush marker is listed, every other
    object (one PUT each) except markers, quarantined files and exports."""
    out = {}
    for rel, info in listing.items():
        parts = rel.split("/")
        if parts[0] in NOT_MIRRORED or (len(parts) > 1 and parts[1] in NOT_MIRRORED) or rel.endswith(MIRROR_SKIPS):
            continue
        if len(parts) == 3 and FLUSH_SEGMENT.match(parts[2]) and marker_rel(parts[0], parts[2]) not in listing:
            continue
        out[rel] = info
    return out


def unmarked_markers(listing: dict[str, tuple[int, int]], run: str, rank: int | None = None) -> list[str]:
    """Markers of ``run`` (of one rank, or all) none of whose flush segments is listed any more."""
    live = {marker_rel(run, rel.split("/")[2]) for rel in listing
            if rel.startswith(f"{run}/") and rel.count("/") == 2 and FLUSH_SEGMENT.match(rel.split("/")[2])}
    prefix = f"{run}/{PUBLISHED}/" + (f"r{rank}-" if rank is not None else "")
    return sorted(rel for rel in listing if rel.startswith(prefix) and rel not in live)


def mirror_dir(remote: Remote) -> Path:
    return cache_dir() / "mirror" / _slot(remote)


def spool_dir(remote: Remote) -> Path:
    """A writer's local copy of what it uploads (its rank's segments, for live compaction and retries)."""
    return cache_dir() / "spool" / _slot(remote)


def writer(store: str | os.PathLike, spool: str | os.PathLike | None = None) -> Location:
    """The location a writer uses: the folder itself, or for a URL a local spool (``spool`` or the default)."""
    if not is_url(store):
        return Location(Path(store))
    remote = parse_url(store)
    return Location(Path(spool) if spool is not None else spool_dir(remote), remote)


def not_found():
    """Arrow's "no such object" file type (imported here: a folder store's readers never need Arrow's filesystems)."""
    import pyarrow.fs as pafs

    return pafs.FileType.NotFound
