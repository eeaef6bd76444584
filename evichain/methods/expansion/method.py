"""The query-expansion baselines as methods (``hyde``, ``query2doc``, ``lamer``; params block
``expansion``): the corpus retrievers the method queries, one LLM client per sample (seed =
``llm.seed`` + sample index), then the method's own ``retrieve`` — as the expansion flow."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from evichain.methods.base import BuildContext, FunctionRetriever, Method, QuestionResult, register
from evichain.methods.expansion.generate import sample_params
from evichain.methods.expansion.hyde import HyDE
from evichain.methods.expansion.lamer import LameR
from evichain.methods.expansion.params import ExpansionParams, retrievers_of, sampling_of
from evichain.methods.expansion.query2doc import Query2Doc
from evichain.methods.expansion.search import CorpusSearch
from evichain.retrieval.bm25 import BM25Index
from evichain.retrieval.run import format_passages, passage_texts

if TYPE_CHECKING:
    from evichain.config import Params


def expansion_summary(trace: pd.DataFrame, method: str, temperature: float,
                      seeds: list[int | None]) -> dict[str, Any]:
    """Counts for the stage summary: statuses, fallbacks, failed generations, tokens."""
    failed = [k for kinds in trace["error_kinds"] for k in kinds]
    return {"method": method, "questions": len(trace),
            "status": {str(k): int(v) for k, v in trace["status"].value_counts().items()},
            "fallbacks": int(trace["fallback"].sum()),
            "no_rows": int(((trace["status"] == "failed") & ~trace["fallback"]).sum()),
            "generations_requested": int(trace["n_requested"].sum()),
            "generations_ok": int(trace["n_generated"].sum()),
            "generations_failed": int(trace["n_failed"].sum()),
            "failure_kinds": {k: failed.count(k) for k in sorted(set(failed))},
            "prompt_tokens": int(trace["prompt_tokens"].sum()),
            "completion_tokens": int(trace["completion_tokens"].sum()),
            "sampling": {"temperature": temperature, "seeds": seeds,
                         "cache_keys": "one per sample: seed = (llm.seed or 0) + sample index"}}


class _Expansion(Method):
    Params = ExpansionParams
    params_key = "expansion"
    uses_llm = True

    def index(self, ctx: BuildContext, variant: str | None = None) -> CorpusSearch:
        """BM25 and/or dense passage vectors, whichever the method queries."""
        params = self.params_of(ctx.params)
        use_bm25, use_dense = retrievers_of(self.name, params)
        bm25 = BM25Index(ctx.corpus, ctx.params.retrieval.bm25) if use_bm25 else None
        vectors = (ctx.encoder()(format_passages(ctx.corpus, ctx.params.retrieval.dense.passage_format))
                   if use_dense else None)
        return CorpusSearch([str(p) for p in ctx.corpus["passage_id"].to_list()], bm25, vectors,
                            ctx.encoder() if use_dense else None)

    def build(self, ctx: BuildContext, variant: str | None = None, index: Any = None) -> FunctionRetriever:
        self.check_variant(variant)
        params: ExpansionParams = self.params_of(ctx.params)
        search = index if index is not None else self.index(ctx)
        temperature, n = sampling_of(self.name, params)
        clients = [ctx.client(p) for p in sample_params(ctx.params.llm, temperature, n)]
        if self.name == "hyde":
            expander: Any = HyDE(clients, search, params)
        elif self.name == "query2doc":
            expander = Query2Doc(clients, search, params)
        else:
            expander = LameR(clients, search, params, passage_texts(ctx.corpus))
        return FunctionRetriever(expander.retrieve, expander)

    def summary(self, params: Params, variant: str | None, trace: pd.DataFrame,
                results: Sequence[QuestionResult], index: Any) -> dict[str, Any]:
        temperature, n = sampling_of(self.name, self.params_of(params))
        seeds = [p.seed for p in sample_params(params.llm, temperature, n)]
        return expansion_summary(trace, self.name, temperature, seeds)


@register
class HyDEMethod(_Expansion):
    """HyDE: dense search with the mean of the question's and generated passages' vectors."""

    name = "hyde"


@register
class Query2DocMethod(_Expansion):
    """query2doc: the question expanded with a generated pseudo-document."""

    name = "query2doc"


@register
class LameRMethod(_Expansion):
    """LameR: BM25 with the question augmented by answers generated from its first BM25 pass."""

    name = "lamer"
