"""The bounds of one user query (``Limits``: rows, bytes, time, DuckDB's memory and the worker's address space) and
its refusal (``ReadOnlyQueryError``).

Its own module, light to import: the CLI's ``sql`` starts the SQL worker (``sqlproc.prestart``) and hands it the
query without importing DuckDB (the worker checks it, ``sandbox``), and a refusal the worker sends back is raised
as this class again.
"""

from __future__ import annotations

from dataclasses import dataclass


class ReadOnlyQueryError(ValueError):
    """A user query that would write, change state or read outside the store's views."""


@dataclass(frozen=True)
class Limits:
    """Bounds of one user query."""

    max_rows: int = 10_000
    """Rows returned at most; more are cut (and reported as cut)."""
    max_bytes: int = 64 * 2**20
    """Arrow bytes returned at most; a result that reaches this is cut at the batch before."""
    timeout_s: float = 30.0
    """Wall-clock seconds before the query is interrupted."""
    memory: str = "1GB"
    """DuckDB memory limit of the throwaway connection (nothing spills to disk)."""
    process_bytes: int = 3 * 2**30
    """Address space of the process the query runs in (``sqlproc``: ``RLIMIT_AS``), DuckDB's buffers, what they do
    not track (list and string builders, the result) and the interpreter's own reservations together."""
