"""The first-stage retrievers as methods: ``bm25`` (:mod:`evichain.retrieval.bm25`) and
``dense`` (φ(q)ᵀφ(d) with the embedding service), with the params blocks ``retrieval.bm25`` /
``retrieval.dense``.

Both score questions in bulk (:class:`BatchRetriever`): the stages hand them shards of questions
(BM25: :data:`BM25_BATCH` at a time; dense: all questions in one product, the score matrix the
dense run has always been cut from); one question at a time gives the same rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from evichain.methods.base import BuildContext, Method, QuestionResult, register
from evichain.retrieval.bm25 import BM25Index
from evichain.retrieval.params import BM25Params, DenseParams
from evichain.retrieval.run import Row, format_passages, top_k_rows

BM25_BATCH = 100
"""Questions per BM25 task."""


class BatchRetriever:
    """A retriever over ``search(question_ids, questions) -> run rows``: :meth:`retrieve_batch`
    scores a shard at once, :meth:`retrieve` one question; ``batch_size`` questions per task
    (None: all)."""

    def __init__(self, search: Callable[[list[str], list[str]], list[Row]],
                 batch_size: int | None, inner: Any = None) -> None:
        self.search, self.batch_size, self.inner = search, batch_size, inner

    def retrieve_batch(self, question_ids: Sequence[str], questions: Sequence[str]) -> list[QuestionResult]:
        """Every question's rows from one ``search`` of the shard; ``compute`` seconds = the
        shard's wall time / its question count."""
        start = time.perf_counter()
        ids = [str(q) for q in question_ids]
        run = self.search(ids, [str(q) for q in questions])
        seconds = (time.perf_counter() - start) / max(1, len(ids))
        rows: dict[str, list[Row]] = {q: [] for q in ids}
        for q, r, p, s in run:
            rows[q].append((str(q), int(r), str(p), float(s)))
        return [QuestionResult(rows[q], {"question_id": q}, {"compute": seconds}) for q in ids]

    def retrieve(self, question_id: str, question: str) -> QuestionResult:
        return self.retrieve_batch([question_id], [question])[0]


@register
class BM25(Method):
    """BM25 top-k (bm25s); only passages that match a query term are ranked."""

    name = "bm25"
    Params = BM25Params
    params_key = "retrieval.bm25"

    def index(self, ctx: BuildContext, variant: str | None = None) -> BM25Index:
        return BM25Index(ctx.corpus, self.params_of(ctx.params))

    def build(self, ctx: BuildContext, variant: str | None = None, index: Any = None) -> BatchRetriever:
        self.check_variant(variant)
        bm25: BM25Index = index if index is not None else self.index(ctx)
        return BatchRetriever(bm25.search_rows, BM25_BATCH, bm25)


@register
class Dense(Method):
    """Dense top-k: inner product of L2-normalised question and passage embeddings."""

    name = "dense"
    Params = DenseParams
    params_key = "retrieval.dense"

    def index(self, ctx: BuildContext, variant: str | None = None) -> np.ndarray:
        params = self.params_of(ctx.params)
        return ctx.encoder()(format_passages(ctx.corpus, params.passage_format))

    def build(self, ctx: BuildContext, variant: str | None = None, index: Any = None) -> BatchRetriever:
        self.check_variant(variant)
        params = self.params_of(ctx.params)
        vectors = index if index is not None else self.index(ctx)
        ids = ctx.corpus["passage_id"].to_list()
        encode = ctx.encoder()

        def search(question_ids: list[str], questions: list[str]) -> list[Row]:
            return top_k_rows(question_ids, encode(questions) @ vectors.T, ids, params.top_k)

        return BatchRetriever(search, None, vectors)
