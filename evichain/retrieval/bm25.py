"""BM25 over passages with bm25s (Lucene IDF by default; Anserini's k1=0.9, b=0.4).

score(q, d) = Σ_{t∈q} IDF(t) · f(t,d)·(k1+1) / (f(t,d) + k1·(1 − b + b·|d|/avgdl)).
Tokenisation: lower-case, ``\\w\\w+`` tokens, English stop words removed, Snowball/Porter
English stemming (PyStemmer) — the same function for passages and questions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import bm25s
import numpy as np

from evichain.retrieval.params import BM25Params
from evichain.retrieval.run import Row, format_passages, run_table, top_k_rows

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl


class BM25Index:
    """A bm25s index over a corpus table (``passage_id, title, text``; polars or pandas);
    ``scores`` gives full score vectors."""

    def __init__(self, corpus: pl.DataFrame | pd.DataFrame, params: BM25Params) -> None:
        self.params = params
        self.passage_ids: list[str] = corpus["passage_id"].to_list()
        tokens = self._tokenize(format_passages(corpus, params.passage_format))
        self.model = bm25s.BM25(k1=params.k1, b=params.b, method=params.method)
        self.model.index(tokens, show_progress=False)

    def _tokenize(self, texts: Sequence[str]) -> bm25s.tokenization.Tokenized:
        return bm25s.tokenize(list(texts), stopwords=self.params.stopwords or [],
                              stemmer=_stemmer(self.params.stemmer), show_progress=False, return_ids=False)

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """A (len(queries) × N) matrix of BM25 scores (0 for query terms absent from the corpus)."""
        vocab = self.model.vocab_dict
        out = np.zeros((len(queries), len(self.passage_ids)), dtype=np.float32)
        for i, toks in enumerate(self._tokenize(queries)):
            known = [t for t in toks if t in vocab]
            if known:
                out[i] = self.model.get_scores(known)
        return out

    def search_rows(self, question_ids: Sequence[str], queries: Sequence[str],
                    k: int | None = None) -> list[Row]:
        """Run rows of the top ``k`` (default ``top_k``) passages per query, ties by corpus
        order; only passages with a matching term (score > 0)."""
        return top_k_rows(question_ids, self.scores(queries), self.passage_ids,
                          k or self.params.top_k, positive_only=True)

    def search(self, question_ids: Sequence[str], queries: Sequence[str], k: int | None = None) -> pd.DataFrame:
        """The run table (:func:`~evichain.retrieval.run.run_table`) of :meth:`search_rows`."""
        return run_table(self.search_rows(question_ids, queries, k))


def _stemmer(language: str | None):  # type: ignore[no-untyped-def]
    """A PyStemmer ``stemWords`` function (built on use, so the index stays picklable)."""
    if not language:
        return None
    import Stemmer

    return Stemmer.Stemmer(language).stemWords
