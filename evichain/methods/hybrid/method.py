"""The EviReform × CEE hybrid as a method (``hybrid``; params block ``evireform``, values from
``evireform.robust``): EviReform's index and Steps 1–7, CEE's coverage-aware final order."""

from __future__ import annotations

from evichain.methods.base import register
from evichain.methods.evireform.method import EviReform
from evichain.methods.hybrid.retrieve import HybridRetriever


@register
class Hybrid(EviReform):
    """EviReform ``robust`` builds the pool; CEE's greedy coverage selection orders it."""

    name = "hybrid"
    variants = ("hybrid",)
    default_variant = "hybrid"
    retriever_cls = HybridRetriever
