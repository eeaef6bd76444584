"""The iterative baselines as methods (``ircot``, ``self_ask``, ``s2g_rag``, ``gear``; params
block ``iterative``): the searcher every step uses (dense with the embedding service, or BM25
with ``retrieval.bm25``), GeAR's entity graph from the proposition index tables, then one
episode per question (:func:`~evichain.methods.iterative.registry.build_method`), as the
iterative flow does. Results carry the evidence rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd
import polars as pl

from evichain.methods.base import (PROPOSITION_INDEX, PROPOSITION_TABLES, BuildContext, FunctionRetriever,
                                   Method, QuestionResult, pandas_boundary, register)
from evichain.methods.expansion.generate import question_sequence
from evichain.methods.iterative.common import (EVIDENCE_SCHEMA, BM25Searcher, DenseSearcher,
                                               Passages, Searcher, summarize)
from evichain.methods.iterative.gear_graph import EntityGraph
from evichain.methods.iterative.params import GRAPH_METHODS, IterativeParams
from evichain.methods.iterative.registry import build_method
from evichain.retrieval.bm25 import BM25Index
from evichain.retrieval.run import format_passages

if TYPE_CHECKING:
    from evichain.config import Params


@dataclass
class IterativeIndex:
    """The searcher and, for GeAR, the entity graph."""

    searcher: Searcher
    graph: EntityGraph | None = None


class _Iterative(Method):
    Params = IterativeParams
    params_key = "iterative"
    uses_llm = True

    def tables(self, params: Any, variant: str | None = None) -> tuple[str, ...]:
        """GeAR reads the proposition tables (its entity graph); the others none."""
        return PROPOSITION_TABLES if self.name in GRAPH_METHODS else ()

    def index(self, ctx: BuildContext, variant: str | None = None) -> IterativeIndex:
        params: IterativeParams = self.params_of(ctx.params)
        if params.retriever == "bm25":
            searcher: Searcher = BM25Searcher(BM25Index(ctx.corpus, ctx.params.retrieval.bm25))
        else:
            encode = ctx.encoder()
            searcher = DenseSearcher(encode(format_passages(ctx.corpus, params.passage_format)), encode)
        graph = None
        if self.name in GRAPH_METHODS:
            ids = ctx.corpus["passage_id"].to_list()
            tables = [pandas_boundary(ctx.table(n)) for n in PROPOSITION_TABLES]  # boundary: gear_graph still pandas
            props = EntityGraph.ordered(tables[0], ids)
            graph = EntityGraph.build(ids, props, tables[1], tables[2],
                                      ctx.encoder()(props["text"].tolist()))
        return IterativeIndex(searcher, graph)

    def build(self, ctx: BuildContext, variant: str | None = None, index: Any = None) -> FunctionRetriever:
        self.check_variant(variant)
        built: IterativeIndex = index if index is not None else self.index(ctx)
        runner = build_method(self.name, self.params_of(ctx.params), Passages.from_corpus(ctx.corpus),
                              built.searcher, ctx.encoder(), built.graph)
        client = ctx.client()

        def retrieve(question_id: str, question: str) -> QuestionResult:
            with question_sequence([client]):
                return runner.run(client, question_id, question)

        return FunctionRetriever(retrieve, runner)

    def summary(self, params: Params, variant: str | None, trace: pd.DataFrame,
                results: Sequence[QuestionResult], index: Any) -> dict[str, Any]:
        return summarize(self.name, trace)

    def evidence_table(self, results: Sequence[QuestionResult]) -> pl.DataFrame:
        """The passages each episode gives the reader, in reading order (:data:`EVIDENCE_SCHEMA`)."""
        rows = [r for result in results for r in result.evidence]
        return pl.DataFrame({c: [r[c] for r in rows] for c in EVIDENCE_SCHEMA}, schema=EVIDENCE_SCHEMA)


@register
class IRCoTMethod(_Iterative):
    """IRCoT: interleaved chain-of-thought steps and retrieval."""

    name = "ircot"


@register
class SelfAskMethod(_Iterative):
    """Self-Ask with a retriever: follow-up questions answered from retrieved passages."""

    name = "self_ask"


@register
class S2GRAGMethod(_Iterative):
    """S2G-RAG: sentence-level evidence gathering."""

    name = "s2g_rag"


@register
class GeARMethod(_Iterative):
    """GeAR: graph expansion over the proposition–entity graph (needs the index tables)."""

    name = "gear"
    index_sources = (PROPOSITION_INDEX,)
