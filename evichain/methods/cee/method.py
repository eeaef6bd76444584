"""CEE as a method (``cee``; params block ``cee``): passage embeddings and the facet bank (the
facet table ``tables["facets"]`` of ``generate_facets``, or the LLM-free sentence facets when
``cee.facets.source: sentences``), then exploration, refinement and selection per question for a
variant (Table 2), as the CEE retrieval flow does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evichain.methods.base import (FACET_INDEX, BuildContext, FunctionRetriever, Method, QuestionResult,
                                   latency_ms, pandas_boundary, register)
from evichain.methods.cee.explore import ExploreLLM
from evichain.methods.cee.facets import Passage, load_passages, sentence_facets
from evichain.methods.cee.params import VARIANTS, CEEParams, variant_params
from evichain.methods.cee.retrieve import CEERetriever
from evichain.methods.cee.scoring import FacetBank
from evichain.retrieval.run import format_passages

if TYPE_CHECKING:
    from evichain.config import Params


@dataclass
class CEEIndex:
    """Passages in stored order, their embeddings E, the facet bank and, for LLM-free
    sentence facets, their counts (``source``, ``passages_with_facets``, ...)."""

    passages: list[Passage]
    E: np.ndarray
    bank: FacetBank
    facet_info: dict[str, Any] | None = None


def retrieval_summary(trace: pd.DataFrame, results: Sequence[QuestionResult]) -> dict[str, Any]:
    """Exploration counts and latency (compute = Eq. 2–8, excluding LLM calls and encoding)."""
    n = len(trace)
    return {"questions": n,
            "stop_reasons": {str(k): int(v) for k, v in trace["stop_reason"].value_counts().items()},
            "mean_rounds": round(float(trace["rounds_run"].mean()), 3) if n else 0.0,
            "mean_probes": round(float(trace["probes"].map(len).mean()), 3) if n else 0.0,
            "mean_pool_size": round(float(trace["pool_size"].mean()), 3) if n else 0.0,
            "gold_in_pool": int(trace["gold_in_pool"].sum()), "gold": int(trace["n_gold"].sum()),
            "llm_failures": int(trace["llm_failures"].map(len).sum()),
            "latency_compute": latency_ms(results, "compute"),
            "latency_encode": latency_ms(results, "encode"), "latency_llm": latency_ms(results, "llm")}


@register
class CEE(Method):
    """Contrastive Evidence Exploration (CEE paper §2)."""

    name = "cee"
    Params = CEEParams
    params_key = "cee"
    variants = tuple(sorted(VARIANTS))
    default_variant = "full"
    uses_llm = True
    index_sources = (FACET_INDEX,)

    def tables(self, params: Any, variant: str | None = None) -> tuple[str, ...]:
        """The LLM facet table, unless the variant uses the LLM-free sentence facets."""
        chosen = variant_params(self.params_of(params), self.check_variant(variant))
        return ("facets",) if chosen.facets.source == "llm" else ()

    def index(self, ctx: BuildContext, variant: str | None = None) -> CEEIndex:
        params = variant_params(self.params_of(ctx.params), self.check_variant(variant))
        encode = ctx.encoder()
        passages = load_passages(pandas_boundary(ctx.corpus))  # boundary: facets still pandas
        E = encode(format_passages(ctx.corpus, params.passage_format))
        if params.facets.source == "sentences":
            built = sentence_facets(passages, E, params.facets.n_neighbours,
                                    params.facets.sentence_facets, encode)
            vectors = built.vectors if built.texts else np.zeros((0, E.shape[1]))
            return CEEIndex(passages, E, FacetBank.build(built.owner.tolist(), vectors, len(passages)),
                            built.info)
        facets = ctx.table("facets")
        row = {p.passage_id: i for i, p in enumerate(passages)}
        facet_pids = [str(p) for p in facets["passage_id"].to_list()]
        unknown = sorted(set(facet_pids) - set(row))
        if unknown:
            raise ValueError(f"facets table has {len(unknown)} passage ids not in the corpus "
                             f"(e.g. {unknown[0]})")
        vectors = encode(facets["facet_query"].to_list())
        return CEEIndex(passages, E, FacetBank.build([row[p] for p in facet_pids], vectors,
                                                     len(passages)))

    def build(self, ctx: BuildContext, variant: str | None = None, index: Any = None) -> FunctionRetriever:
        params = variant_params(self.params_of(ctx.params), self.check_variant(variant))
        built: CEEIndex = index if index is not None else self.index(ctx, variant)
        inner = CEERetriever(built.E, built.passages, built.bank, params,
                             ExploreLLM(ctx.client(), params), ctx.encoder())

        def retrieve(question_id: str, question: str) -> QuestionResult:
            return inner.retrieve(question_id, question, ctx.gold_of(question_id))

        return FunctionRetriever(retrieve, inner)

    def summary(self, params: Params, variant: str | None, trace: pd.DataFrame,
                results: Sequence[QuestionResult], index: Any) -> dict[str, Any]:
        """Exploration counts; the sentence facets' counts (``facets``) where the index built
        them; bridge-expansion counts where it is on."""
        chosen = variant_params(self.params_of(params), self.check_variant(variant))
        out = retrieval_summary(trace, results)
        if index.facet_info is not None:
            out["facets"] = index.facet_info
        if chosen.bridge_expansion:
            n = len(trace)
            out["bridge_added"] = int(trace["bridge_added"].sum()) if n else 0
            out["mean_bridge_added"] = round(float(trace["bridge_added"].mean()), 3) if n else 0.0
        return out
