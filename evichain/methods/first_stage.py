"""The first-stage retrievers as methods: ``bm25`` (:mod:`evichain.retrieval.bm25`) and
``dense`` (φ(q)ᵀφ(d) with the embedding service), with the params blocks ``retrieval.bm25`` /
``retrieval.dense``. The stages compute the same runs in batch (:mod:`flows.retrieve`)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from evichain.methods.base import BuildContext, FunctionRetriever, Method, QuestionResult, register, rows_of
from evichain.retrieval.bm25 import BM25Index
from evichain.retrieval.params import BM25Params, DenseParams
from evichain.retrieval.run import format_passages, run_from_scores


@register
class BM25(Method):
    """BM25 top-k (bm25s); only passages that match a query term are ranked."""

    name = "bm25"
    Params = BM25Params
    params_key = "retrieval.bm25"

    def index(self, ctx: BuildContext, variant: str | None = None) -> BM25Index:
        return BM25Index(ctx.corpus, self.params_of(ctx.params))

    def build(self, ctx: BuildContext, variant: str | None = None, index: Any = None) -> FunctionRetriever:
        self.check_variant(variant)
        bm25: BM25Index = index if index is not None else self.index(ctx)

        def retrieve(question_id: str, question: str) -> QuestionResult:
            start = time.perf_counter()
            rows = rows_of(bm25.search([question_id], [question]))
            return QuestionResult(rows, {"question_id": question_id},
                                  {"compute": time.perf_counter() - start})

        return FunctionRetriever(retrieve, bm25)


@register
class Dense(Method):
    """Dense top-k: inner product of L2-normalised question and passage embeddings."""

    name = "dense"
    Params = DenseParams
    params_key = "retrieval.dense"

    def index(self, ctx: BuildContext, variant: str | None = None) -> np.ndarray:
        params = self.params_of(ctx.params)
        return ctx.encoder()(format_passages(ctx.corpus, params.passage_format))

    def build(self, ctx: BuildContext, variant: str | None = None, index: Any = None) -> FunctionRetriever:
        self.check_variant(variant)
        params = self.params_of(ctx.params)
        vectors = index if index is not None else self.index(ctx)
        ids = ctx.corpus["passage_id"].tolist()
        encode = ctx.encoder()

        def retrieve(question_id: str, question: str) -> QuestionResult:
            start = time.perf_counter()
            q = encode([question])
            encoded = time.perf_counter()
            rows = rows_of(run_from_scores([question_id], q @ vectors.T, ids, params.top_k))
            return QuestionResult(rows, {"question_id": question_id},
                                  {"encode": encoded - start, "compute": time.perf_counter() - encoded})

        return FunctionRetriever(retrieve, vectors)
