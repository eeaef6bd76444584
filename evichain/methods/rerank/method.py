"""The rerankers as methods (``listwise``, ``cross_encoder``; params block ``rerank``): the
question's dense pool (the first ``rerank.pool_size`` passages of the dense ranking, the
``retrieval.dense`` passage format), reranked, then the dense top-k below the pool, as the
``retrieve_rerank`` flow does (:func:`~evichain.methods.rerank.apply.rerank_pool`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from evichain.methods.base import BuildContext, FunctionRetriever, Method, QuestionResult, register
from evichain.methods.rerank.apply import Reranker, rerank_pool
from evichain.methods.rerank.cross_encoder import CrossEncoderReranker, load_cross_encoder
from evichain.methods.rerank.listwise import ListwiseReranker
from evichain.methods.rerank.params import RerankParams
from evichain.methods.rerank.pool import pool_of, ranked_ids
from evichain.retrieval.run import format_passages, run_from_scores


class _Rerank(Method):
    Params = RerankParams
    params_key = "rerank"

    def index(self, ctx: BuildContext, variant: str | None = None) -> np.ndarray:
        """Passage embeddings of the dense pool."""
        return ctx.encoder()(format_passages(ctx.corpus, ctx.params.retrieval.dense.passage_format))

    def reranker(self, ctx: BuildContext, params: RerankParams) -> Reranker:
        raise NotImplementedError

    def build(self, ctx: BuildContext, variant: str | None = None, index: Any = None) -> FunctionRetriever:
        self.check_variant(variant)
        params: RerankParams = self.params_of(ctx.params)
        vectors = index if index is not None else self.index(ctx)
        reranker = self.reranker(ctx, params)
        encode = ctx.encoder()
        ids = ctx.corpus["passage_id"].tolist()
        corpus = ctx.corpus.set_index("passage_id")
        depth = max(params.pool_size, ctx.params.retrieval.dense.top_k)

        def retrieve(question_id: str, question: str) -> QuestionResult:
            scores = encode([question]) @ vectors.T
            ranking = ranked_ids(run_from_scores([question_id], scores, ids, depth)).get(question_id, [])
            shallow = ranking[:ctx.params.retrieval.dense.top_k]
            tail = [p for p, _ in shallow[params.pool_size:]]
            rows, trace = rerank_pool(reranker, question_id, question,
                                      pool_of(ranking, params.pool_size, corpus), tail,
                                      ctx.gold_of(question_id))
            return QuestionResult(rows, trace)

        return FunctionRetriever(retrieve, reranker)


@register
class Listwise(_Rerank):
    """Listwise LLM reranking (EviReform Listing 14)."""

    name = "listwise"
    uses_llm = True

    def reranker(self, ctx: BuildContext, params: RerankParams) -> Reranker:
        return ListwiseReranker(ctx.client(), params.listwise)


@register
class CrossEncoder(_Rerank):
    """A local sentence-transformers cross-encoder."""

    name = "cross_encoder"

    def reranker(self, ctx: BuildContext, params: RerankParams) -> Reranker:
        return CrossEncoderReranker(load_cross_encoder(params.cross_encoder), params.cross_encoder)
