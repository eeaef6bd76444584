"""The rerankers as methods (``listwise``, ``cross_encoder``; params block ``rerank``): each
question's pool is the first ``rerank.pool_size`` passages of the dense run (``runs/dense``,
recomputed to that depth with the ``retrieval.dense`` passage format when the run is shallower,
:func:`~evichain.methods.rerank.pool.first_stage_pools`), reranked, then the dense run below the
pool (:func:`~evichain.methods.rerank.apply.rerank_pool`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from evichain.methods.base import (
    DENSE_RUN_INDEX,
    BuildContext,
    FunctionRetriever,
    Method,
    QuestionResult,
    register,
)
from evichain.methods.rerank.apply import Reranker, rerank_pool
from evichain.methods.rerank.cross_encoder import CrossEncoderReranker, load_cross_encoder
from evichain.methods.rerank.listwise import ListwiseReranker
from evichain.methods.rerank.params import RerankParams
from evichain.methods.rerank.pool import Pools, first_stage_pools, pool_of, rerank_summary
from evichain.retrieval.run import passage_texts

if TYPE_CHECKING:
    from evichain.config import Params

FIRST_STAGE = DENSE_RUN_INDEX.tables[0]
"""The table a reranker reads: the dense stage's run (EviReform Table C.2: dense top 40)."""


class _Rerank(Method):
    Params = RerankParams
    params_key = "rerank"
    index_sources = (DENSE_RUN_INDEX,)

    def tables(self, params: Any, variant: str | None = None) -> tuple[str, ...]:
        return (FIRST_STAGE,)

    def run_name(self, variant: str | None = None) -> str:
        """``rerank-<name>`` (a reranked run beside the first-stage runs)."""
        self.check_variant(variant)
        return f"rerank-{self.name}"

    def index(self, ctx: BuildContext, variant: str | None = None) -> Pools:
        """The pool of every question of ``ctx.questions``."""
        if ctx.questions is None:
            raise ValueError(f"{self.name}: the pools are cut per question; BuildContext.questions "
                             "must hold the questions to rerank")
        return first_stage_pools(ctx.table(FIRST_STAGE), ctx.corpus, ctx.questions,
                                 self.params_of(ctx.params).pool_size,
                                 ctx.params.retrieval.dense.passage_format, ctx.encoder())

    def reranker(self, ctx: BuildContext, params: RerankParams) -> Reranker:
        raise NotImplementedError

    def build(self, ctx: BuildContext, variant: str | None = None, index: Any = None) -> FunctionRetriever:
        self.check_variant(variant)
        params: RerankParams = self.params_of(ctx.params)
        reranker = self.reranker(ctx, params)
        pools: Pools = index if index is not None else self.index(ctx)
        corpus = passage_texts(ctx.corpus)

        def retrieve(question_id: str, question: str) -> QuestionResult:
            pool = pool_of(pools.ranking.get(question_id, []), params.pool_size, corpus)
            rows, trace = rerank_pool(reranker, question_id, question, pool,
                                      pools.tail.get(question_id, []), ctx.gold_of(question_id))
            return QuestionResult(rows, trace)

        return FunctionRetriever(retrieve, reranker)

    def summary(self, params: Params, variant: str | None, trace: pd.DataFrame,
                results: Sequence[QuestionResult], index: Any) -> dict[str, Any]:
        return rerank_summary(trace, index, self.name)


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
