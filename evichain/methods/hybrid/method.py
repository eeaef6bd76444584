"""The EviReform × CEE hybrid as a method (``hybrid``; params block ``evireform``, values from
``evireform.robust``): EviReform's index and Steps 1–7, CEE's coverage-aware final order."""

from __future__ import annotations

from typing import Any

from evichain.methods.base import PROPOSITION_TABLES, BuildContext, FunctionRetriever, Method, register
from evichain.methods.evireform.index import EviReformIndex
from evichain.methods.evireform.method import build_evireform_index, evireform_retriever
from evichain.methods.evireform.params import EviReformParams
from evichain.methods.evireform.variants import variant_params
from evichain.methods.hybrid.retrieve import HybridRetriever


@register
class Hybrid(Method):
    """EviReform ``robust`` builds the pool; CEE's greedy coverage selection orders it."""

    name = "hybrid"
    Params = EviReformParams
    params_key = "evireform"
    variants = ("hybrid",)
    uses_llm = True

    def tables(self, params: Any, variant: str | None = None) -> tuple[str, ...]:
        return PROPOSITION_TABLES

    def index(self, ctx: BuildContext, variant: str | None = None) -> EviReformIndex:
        return build_evireform_index(ctx, self.params_of(ctx.params))

    def build(self, ctx: BuildContext, variant: str | None = None, index: Any = None) -> FunctionRetriever:
        params = variant_params(self.params_of(ctx.params), self.check_variant(variant))
        built = index if index is not None else self.index(ctx)
        return evireform_retriever(ctx, built, params, HybridRetriever)
