"""The plain retrievers an expansion method queries: BM25 and dense over the whole corpus.

Both are the project's first-stage retrievers (``retrieval.bm25``; ``retrieval.dense``
passage format with ``embed.model``), so an expanded query is scored exactly as the plain
question would be. Top-k with ties by stored passage order (:func:`~evichain.retrieval.run.top_k_indices`);
BM25 keeps only passages with a matching term, as the BM25 stage does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from evichain.retrieval.bm25 import BM25Index
from evichain.retrieval.run import top_k_indices

Row = tuple[str, int, str, float]
Encode = Callable[[Sequence[str]], np.ndarray]


def rows_from_scores(question_id: str, scores: np.ndarray, passage_ids: Sequence[str], k: int,
                     positive_only: bool = False) -> list[Row]:
    """Run rows of the top ``k`` of one score vector."""
    idx = top_k_indices(scores, k)
    if positive_only:
        idx = idx[scores[idx] > 0]
    return [(question_id, r + 1, str(passage_ids[j]), float(scores[j])) for r, j in enumerate(idx)]


@dataclass
class CorpusSearch:
    """BM25 index and/or passage vectors of one corpus (either may be absent if unused)."""

    passage_ids: list[str]
    bm25_index: BM25Index | None = None
    passage_vectors: np.ndarray | None = None
    encode: Encode | None = None

    def bm25(self, question_id: str, query: str, k: int) -> list[Row]:
        """BM25 top ``k`` of a text query."""
        if self.bm25_index is None:
            raise RuntimeError("BM25 search requested but no BM25 index was built")
        return rows_from_scores(question_id, self.bm25_index.scores([query])[0], self.passage_ids,
                                k, positive_only=True)

    def dense_vector(self, question_id: str, vector: np.ndarray, k: int) -> list[Row]:
        """Dense top ``k`` by inner product with a query vector."""
        if self.passage_vectors is None:
            raise RuntimeError("dense search requested but no passage vectors were encoded")
        return rows_from_scores(question_id, self.passage_vectors @ vector, self.passage_ids, k)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised embeddings of ``texts`` (the project's embedder)."""
        if self.encode is None:
            raise RuntimeError("dense search requested but no embedder was given")
        return self.encode(list(texts))

    def dense(self, question_id: str, query: str, k: int) -> list[Row]:
        """Dense top ``k`` of a text query."""
        return self.dense_vector(question_id, self.embed([query])[0], k)
