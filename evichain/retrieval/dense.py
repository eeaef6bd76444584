"""Dense retrieval: score(q, d) = φ(q)ᵀφ(d) with L2-normalised sentence embeddings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from evichain.embed import Embedder
from evichain.retrieval.params import DenseParams
from evichain.retrieval.run import Row, format_passages, run_table, top_k_rows

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl


class DenseIndex:
    """Passage embeddings of a corpus table (``passage_id, title, text``; polars or pandas);
    queries are encoded with the same model."""

    def __init__(self, corpus: pl.DataFrame | pd.DataFrame, params: DenseParams, embedder: Embedder,
                 progress: bool = False) -> None:
        self.params = params
        self.embedder = embedder
        self.passage_ids: list[str] = corpus["passage_id"].to_list()
        self.vectors = embedder.encode(format_passages(corpus, params.passage_format),
                                       progress=progress, desc="passages")

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """A (len(queries) × N) cosine-similarity matrix."""
        q = self.embedder.encode(list(queries))
        return q @ self.vectors.T

    def search_rows(self, question_ids: Sequence[str], queries: Sequence[str],
                    k: int | None = None) -> list[Row]:
        """Run rows of the top ``k`` (default ``top_k``) passages per query by φ(q)ᵀφ(d), ties
        by corpus order."""
        return top_k_rows(question_ids, self.scores(queries), self.passage_ids, k or self.params.top_k)

    def search(self, question_ids: Sequence[str], queries: Sequence[str], k: int | None = None) -> pd.DataFrame:
        """The run table (:func:`~evichain.retrieval.run.run_table`) of :meth:`search_rows`."""
        return run_table(self.search_rows(question_ids, queries, k))
