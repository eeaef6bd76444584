"""Build one iterative baseline by name from the corpus, a searcher and (GeAR) the graph."""

from __future__ import annotations

from typing import Protocol

from evichain.llm import LLMClient
from evichain.methods.iterative.common import Encoder, Outcome, Passages, Searcher
from evichain.methods.iterative.gear import GeAR
from evichain.methods.iterative.gear_graph import EntityGraph
from evichain.methods.iterative.ircot import IRCoT
from evichain.methods.iterative.params import METHODS, IterativeParams
from evichain.methods.iterative.s2g_rag import S2GRAG
from evichain.methods.iterative.self_ask import SelfAsk


class IterativeMethod(Protocol):
    """A baseline that runs one question: ``run(client, question_id, question)``."""

    name: str

    def run(self, client: LLMClient, question_id: str, question: str) -> Outcome: ...


def build_method(name: str, params: IterativeParams, passages: Passages, searcher: Searcher,
                 encode: Encoder, graph: EntityGraph | None = None) -> IterativeMethod:
    """The baseline ``name`` (one of :data:`METHODS`) with its params block."""
    if name == "ircot":
        return IRCoT(passages, searcher, params.ircot)
    if name == "self_ask":
        return SelfAsk(passages, searcher, params.self_ask)
    if name == "s2g_rag":
        return S2GRAG(passages, searcher, params.s2g_rag)
    if name == "gear":
        if graph is None:
            raise ValueError("gear needs the EviReform index graph (index/propositions, "
                             "entities, incidence) of the dataset")
        return GeAR(passages, searcher, graph, encode, params.gear)
    raise ValueError(f"unknown iterative method {name!r}; known: {list(METHODS)}")
