"""EviReform as a method (``evireform``; params block ``evireform``): the proposition–entity
index from the proposition tables (propositions encoded with the embedding service), then
Steps 1–7 per question for a variant (:mod:`.variants`; ``full`` is the block as written).
The variant ``hybrid`` (``final: coverage``) is also the method ``hybrid``
(:mod:`evichain.methods.hybrid.method`)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import pandas as pd

from evichain.methods.base import (PROPOSITION_INDEX, PROPOSITION_TABLES, BuildContext, FunctionRetriever,
                                   Method, QuestionResult, latency_ms, pandas_boundary, register)
from evichain.methods.evireform.index import EviReformIndex, build_index, order_propositions
from evichain.methods.evireform.llm_steps import EviReformLLM
from evichain.methods.evireform.params import EviReformParams
from evichain.methods.evireform.retrieve import EviReformRetriever
from evichain.methods.evireform.variants import OURS, VARIANTS, uses_llm, variant_params
from evichain.methods.hybrid.retrieve import HybridRetriever

if TYPE_CHECKING:
    from evichain.config import Params


def build_evireform_index(ctx: BuildContext, params: EviReformParams) -> EviReformIndex:
    """The index of ``ctx``'s proposition tables, as the retrieval flow builds it."""
    props = order_propositions(ctx.table("propositions"), ctx.corpus["passage_id"].to_list())
    H = ctx.encoder()(props["text"].to_list())
    corpus, props, entities, incidence = (pandas_boundary(t) for t in (  # boundary: index still pandas
        ctx.corpus, props, ctx.table("entities"), ctx.table("incidence")))
    return build_index(corpus, props, entities, incidence, H, params.passage_format)


def evireform_retriever(ctx: BuildContext, index: EviReformIndex, params: EviReformParams,
                        cls: type[EviReformRetriever]) -> FunctionRetriever:
    """``cls`` over ``index`` adapted to the one signature (question encoded per call, gold
    from ``ctx.gold`` for the trace's pool-coverage fields); ``final: coverage`` (the
    ``hybrid`` variant) takes the hybrid's coverage-ordered readout."""
    steps = EviReformLLM(ctx.client(), params) if uses_llm(params) else None
    encode = ctx.encoder()
    chosen = HybridRetriever if params.final == "coverage" else cls
    inner = chosen(index, params, steps, encode)

    def retrieve(question_id: str, question: str) -> QuestionResult:
        return inner.retrieve(question_id, question, encode([question])[0], ctx.gold_of(question_id))

    return FunctionRetriever(retrieve, inner)


def retrieval_summary(trace: pd.DataFrame, results: Sequence[QuestionResult]) -> dict[str, Any]:
    """Fallback counts and latency excluding LLM steps (wall and thread CPU time; the
    residual-query encoding separately), under ``max_workers`` concurrent question tasks."""
    return {"questions": len(trace),
            "selection_fallbacks": int(trace["selection_fallback"].sum()),
            "residual_fallbacks": int(trace["residual_fallback"].sum()),
            "judge_fallbacks": int(trace["judge_fallback"].sum()),
            "invalid_selected_ids": int(trace["n_invalid_ids"].sum()),
            "selection_status": {str(k): int(v) for k, v in trace["selection_status"].value_counts().items()},
            "latency_compute": latency_ms(results, "compute"),
            "latency_compute_cpu": latency_ms(results, "compute_cpu"),
            "latency_encode": latency_ms(results, "encode")}


def one_blas_thread() -> contextlib.AbstractContextManager[Any]:
    """One BLAS thread per question task (tasks already run in parallel threads)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: only a speed setting
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


@register
class EviReform(Method):
    """Evidence-guided query reformulation over a proposition–entity index (paper §3)."""

    name = "evireform"
    Params = EviReformParams
    params_key = "evireform"
    variants = tuple(sorted([*VARIANTS, *OURS]))
    default_variant = "full"
    uses_llm = True
    index_sources = (PROPOSITION_INDEX,)
    retriever_cls: ClassVar[type[EviReformRetriever]] = EviReformRetriever
    """The retriever :meth:`build` makes (the hybrid subclass swaps in its own)."""

    def tables(self, params: Any, variant: str | None = None) -> tuple[str, ...]:
        return PROPOSITION_TABLES

    def calls_llm(self, params: Params, variant: str | None = None) -> bool:
        """Selection, reformulation or judge by an LLM in ``variant`` (variants such as ``base``
        call none)."""
        return uses_llm(variant_params(self.params_of(params), self.check_variant(variant)))

    def index(self, ctx: BuildContext, variant: str | None = None) -> EviReformIndex:
        return build_evireform_index(ctx, self.params_of(ctx.params))

    def build(self, ctx: BuildContext, variant: str | None = None, index: Any = None) -> FunctionRetriever:
        chosen = self.check_variant(variant)
        params = variant_params(self.params_of(ctx.params), chosen)
        built = index if index is not None else self.index(ctx)
        return evireform_retriever(ctx, built, params, self.retriever_cls)

    def compute_limits(self) -> contextlib.AbstractContextManager[Any]:
        return one_blas_thread()

    def summary(self, params: Params, variant: str | None, trace: pd.DataFrame,
                results: Sequence[QuestionResult], index: Any) -> dict[str, Any]:
        return retrieval_summary(trace, results)
