"""CEE as a method (``cee``; params block ``cee``): passage embeddings and the facet bank (the
facet table ``tables["facets"]`` of ``generate_facets``, or the LLM-free sentence facets when
``cee.facets.source: sentences``), then exploration, refinement and selection per question for a
variant (Table 2), as the CEE retrieval flow does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from evichain.methods.base import BuildContext, FunctionRetriever, Method, QuestionResult, register
from evichain.methods.cee.explore import ExploreLLM
from evichain.methods.cee.facets import Passage, load_passages, sentence_facets
from evichain.methods.cee.params import VARIANTS, CEEParams, variant_params
from evichain.methods.cee.retrieve import CEERetriever
from evichain.methods.cee.scoring import FacetBank
from evichain.retrieval.run import format_passages


@dataclass
class CEEIndex:
    """Passages in stored order, their embeddings E and the facet bank."""

    passages: list[Passage]
    E: np.ndarray
    bank: FacetBank


@register
class CEE(Method):
    """Contrastive Evidence Exploration (CEE paper §2)."""

    name = "cee"
    Params = CEEParams
    params_key = "cee"
    variants = tuple(sorted(VARIANTS))
    default_variant = "full"
    uses_llm = True

    def tables(self, params: Any, variant: str | None = None) -> tuple[str, ...]:
        """The LLM facet table, unless the variant uses the LLM-free sentence facets."""
        chosen = variant_params(self.params_of(params), self.check_variant(variant))
        return ("facets",) if chosen.facets.source == "llm" else ()

    def index(self, ctx: BuildContext, variant: str | None = None) -> CEEIndex:
        params = variant_params(self.params_of(ctx.params), self.check_variant(variant))
        encode = ctx.encoder()
        passages = load_passages(ctx.corpus)
        E = encode(format_passages(ctx.corpus, params.passage_format))
        if params.facets.source == "sentences":
            built = sentence_facets(passages, E, params.facets.n_neighbours,
                                    params.facets.sentence_facets, encode)
            vectors = built.vectors if built.texts else np.zeros((0, E.shape[1]))
            return CEEIndex(passages, E, FacetBank.build(built.owner.tolist(), vectors, len(passages)))
        facets = ctx.table("facets")
        row = {p.passage_id: i for i, p in enumerate(passages)}
        unknown = sorted(set(facets["passage_id"]) - set(row))
        if unknown:
            raise ValueError(f"facets table has {len(unknown)} passage ids not in the corpus "
                             f"(e.g. {unknown[0]})")
        vectors = encode(facets["facet_query"].tolist())
        return CEEIndex(passages, E, FacetBank.build([row[p] for p in facets["passage_id"]], vectors,
                                                     len(passages)))

    def build(self, ctx: BuildContext, variant: str | None = None, index: Any = None) -> FunctionRetriever:
        params = variant_params(self.params_of(ctx.params), self.check_variant(variant))
        built: CEEIndex = index if index is not None else self.index(ctx, variant)
        inner = CEERetriever(built.E, built.passages, built.bank, params,
                             ExploreLLM(ctx.client(), params), ctx.encoder())

        def retrieve(question_id: str, question: str) -> QuestionResult:
            return inner.retrieve(question_id, question, ctx.gold_of(question_id))

        return FunctionRetriever(retrieve, inner)
