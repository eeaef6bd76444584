"""The graph retrievers as methods (``hipporag2``, ``catrag``, ``proprag``; params block
``graph``): HippoRAG 2 / CatRAG over the OpenIE triple index (``tables["triples"]``, or the
LLM-free triples of the proposition tables when absent), PropRAG over the proposition tables,
as the graph flow builds them; the question is encoded with the embedding service."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from evichain.methods.base import (PROPOSITION_INDEX, PROPOSITION_TABLES, TRIPLE_INDEX, BuildContext,
                                   FunctionRetriever, Method, QuestionResult, latency_ms, pandas_boundary,
                                   register)
from evichain.methods.graph.catrag import CatRAGRetriever
from evichain.methods.graph.hipporag2 import HippoRAG2Retriever, build_hippo_index
from evichain.methods.graph.llm import GraphLLM
from evichain.methods.graph.llm import uses_llm as query_time_llm
from evichain.methods.graph.openie import TRIPLE_COLUMNS, proposition_triples
from evichain.methods.graph.params import GraphParams
from evichain.methods.graph.proprag import PropRAGRetriever, build_prop_index

if TYPE_CHECKING:
    from evichain.config import Params


def _labelled(ctx: BuildContext) -> Any:
    encode = ctx.encoder()
    return lambda texts, label: encode(list(texts))


def triples_table(ctx: BuildContext) -> pd.DataFrame:
    """``tables["triples"]``, else the LLM-free triples of the proposition tables (pandas, the
    type :func:`~evichain.methods.graph.graph.triple_facts` reads)."""
    if "triples" in ctx.tables:
        return pandas_boundary(ctx.tables["triples"])  # boundary: graph still pandas
    inputs = [pandas_boundary(t) for t in (ctx.corpus, *map(ctx.table, PROPOSITION_TABLES))]
    outcomes = proposition_triples(*inputs)  # boundary: openie still pandas
    return pd.DataFrame([t for o in outcomes for t in o.triples], columns=TRIPLE_COLUMNS)


_REPAIRS = ("n_unknown_fact_ids", "n_duplicate_fact_ids", "n_missing_scores", "n_unknown_score_ids",
            "n_duplicate_score_ids", "n_out_of_range_scores")


def retrieval_summary(trace: pd.DataFrame, results: Sequence[QuestionResult]) -> dict[str, Any]:
    """Status / fallback / repair counts, LLM calls per question and latency of a graph run
    (``compute`` excludes LLM calls and online encoding)."""
    fallbacks = trace["fallback"][trace["fallback"] != ""].value_counts()
    return {"questions": len(trace),
            "status": {str(k): int(v) for k, v in trace["status"].value_counts().items()},
            "failed_calls": int(trace["n_failed_calls"].sum()),
            "failure_kinds": {str(k): int(v) for k, v in
                              trace.loc[trace["status"] != "ok", "error_kind"].value_counts().items()},
            "fallbacks": {str(k): int(v) for k, v in fallbacks.items()},
            "repaired": {k: int(trace[k].sum()) for k in _REPAIRS if k in trace},
            **({"split_batches": int(trace["n_split_batches"].sum())}
               if "n_split_batches" in trace else {}),
            "llm_calls_per_question": round(float(trace["llm_calls"].mean()) if len(trace) else 0.0, 3),
            "latency_compute": latency_ms(results, "compute"),
            "latency_encode": latency_ms(results, "encode")}


def index_statistics(name: str, index: Any) -> dict[str, Any]:
    """Graph statistics of the built index, with the proposition (PropRAG) or fact count."""
    if name == "proprag":
        return {**index.graph.statistics(), "propositions": len(index.texts)}
    return {**index.graph.statistics(), "facts": len(index.facts.facts)}


class _Graph(Method):
    Params = GraphParams
    params_key = "graph"
    index_sources = (TRIPLE_INDEX, PROPOSITION_INDEX)

    def calls_llm(self, params: Params, variant: str | None = None) -> bool:
        """The query-time LLM steps the ``graph`` block switches on (recognition memory,
        CatRAG's anchoring and edge weighting; PropRAG has none)."""
        self.check_variant(variant)
        return query_time_llm(self.name, self.params_of(params))

    def tables(self, params: Any, variant: str | None = None) -> tuple[str, ...]:
        """PropRAG: the proposition tables; HippoRAG 2 / CatRAG: the LLM OpenIE triples when
        ``graph.openie`` is ``llm``, else triples derived from the proposition tables."""
        if self.name != "proprag" and params.graph.openie == "llm":
            return ("triples",)
        return PROPOSITION_TABLES

    def index(self, ctx: BuildContext, variant: str | None = None) -> Any:
        params = self.params_of(ctx.params)
        if self.name == "proprag":
            return build_prop_index(ctx.corpus, ctx.table("propositions"), ctx.table("entities"),
                                    ctx.table("incidence"), _labelled(ctx), params)
        return build_hippo_index(ctx.corpus, triples_table(ctx), _labelled(ctx), params)

    def build(self, ctx: BuildContext, variant: str | None = None, index: Any = None) -> FunctionRetriever:
        self.check_variant(variant)
        params: GraphParams = self.params_of(ctx.params)
        built = index if index is not None else self.index(ctx)
        encode = ctx.encoder()
        llm = GraphLLM(ctx.client()) if query_time_llm(self.name, params) else None
        if self.name == "proprag":
            inner: Any = PropRAGRetriever(built, params, encode)
        elif self.name == "catrag":
            inner = CatRAGRetriever(built, params, llm, encode)
        else:
            inner = HippoRAG2Retriever(built, params, llm)

        def retrieve(question_id: str, question: str) -> QuestionResult:
            result: QuestionResult = inner.retrieve(question_id, question, encode([question])[0])
            return result

        return FunctionRetriever(retrieve, inner)

    def summary(self, params: Params, variant: str | None, trace: pd.DataFrame,
                results: Sequence[QuestionResult], index: Any) -> dict[str, Any]:
        return {**retrieval_summary(trace, results), "index": index_statistics(self.name, index)}


@register
class HippoRAG2Method(_Graph):
    """HippoRAG 2: Personalized PageRank over the OpenIE entity/passage graph."""

    name = "hipporag2"
    uses_llm = True


@register
class CatRAGMethod(_Graph):
    """CatRAG: HippoRAG 2 with query-time anchoring and edge weighting."""

    name = "catrag"
    uses_llm = True


@register
class PropRAGMethod(_Graph):
    """PropRAG: beam search over proposition paths, then PPR."""

    name = "proprag"
    index_sources = (PROPOSITION_INDEX,)
