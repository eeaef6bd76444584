"""Dense retrieval: score(q, d) = φ(q)ᵀφ(d) with L2-normalised sentence embeddings."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from evichain.retrieval.params import DenseParams
from evichain.embed import Embedder
from evichain.retrieval.run import format_passages, run_from_scores


class DenseIndex:
    """Passage embeddings of a corpus; queries are encoded with the same model."""

    def __init__(self, corpus: pd.DataFrame, params: DenseParams, embedder: Embedder,
                 progress: bool = False) -> None:
        self.params = params
        self.embedder = embedder
        self.passage_ids = corpus["passage_id"].tolist()
        self.vectors = embedder.encode(format_passages(corpus, params.passage_format),
                                       progress=progress, desc="passages")

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """A (len(queries) × N) cosine-similarity matrix."""
        q = self.embedder.encode(list(queries))
        return q @ self.vectors.T

    def search(self, question_ids: Sequence[str], queries: Sequence[str], k: int | None = None) -> pd.DataFrame:
        return run_from_scores(question_ids, self.scores(queries), self.passage_ids, k or self.params.top_k)
