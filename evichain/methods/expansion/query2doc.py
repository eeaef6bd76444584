"""query2doc: query expansion with a few-shot pseudo-document (Wang, Yang and Wei, EMNLP 2023, §2).

The LLM writes one pseudo-document d' from a few-shot prompt (k = 4 demonstrations; prompt in
:mod:`evichain.methods.expansion.prompts`). The expanded query is, per retriever (§2):

* sparse (BM25): q⁺ = concat({q} × n, d') with n = 5 — the query repeated to balance its
  weight against the much longer pseudo-document (:func:`sparse_query`);
* dense: q⁺ = concat(q, [SEP], d') (:func:`dense_query`).

``expansion.query2doc.retriever`` chooses the retriever (default dense: see
:class:`~evichain.methods.expansion.params.Query2DocParams`). No pseudo-document: see
``expansion.on_all_failed`` (the query is then the question alone).
"""

from __future__ import annotations

from collections.abc import Sequence

from evichain.llm import LLMClient
from evichain.methods.base import Outcome
from evichain.methods.expansion.generate import generate, generation_trace, outcome_status, texts
from evichain.methods.expansion.params import ExpansionParams
from evichain.methods.expansion.prompts import QUERY2DOC, bounded, nonempty_passage, query2doc_data
from evichain.methods.expansion.search import CorpusSearch


def sparse_query(question: str, document: str | None, repeats: int) -> str:
    """BM25 query: the question ``repeats`` times, then the pseudo-document (space-joined)."""
    return " ".join([question] * repeats + ([document] if document else []))


def dense_query(question: str, document: str | None, separator: str) -> str:
    """Dense query: question + separator + pseudo-document (the question alone without one)."""
    return f"{question}{separator}{document}" if document else question


class Query2Doc:
    """One pseudo-document → expanded query → BM25 or dense search."""

    def __init__(self, clients: Sequence[LLMClient], search: CorpusSearch, params: ExpansionParams) -> None:
        self.clients = list(clients)
        self.search = search
        self.params = params
        self.prompt = bounded(QUERY2DOC, params.query2doc.max_passage_chars)

    def expanded_query(self, question: str, document: str | None) -> str:
        """q⁺ for the configured retriever."""
        p = self.params.query2doc
        if p.retriever == "bm25":
            return sparse_query(question, document, p.query_repeats)
        return dense_query(question, document, p.dense_separator)

    def retrieve(self, question_id: str, question: str) -> Outcome:
        """Generate d', build q⁺, search (module docstring)."""
        p = self.params.query2doc
        gens = generate(self.clients, self.prompt, nonempty_passage,
                        data=query2doc_data(question, p.n_examples))
        trace = {"question_id": question_id, "method": "query2doc", "retriever": p.retriever,
                 **generation_trace(gens, self.params.on_all_failed)}
        _, _, write = outcome_status(gens, self.params.on_all_failed)
        docs = texts(gens)
        query = self.expanded_query(question, docs[0] if docs else None)
        trace["expanded_query"] = query if write else ""
        if not write:
            return Outcome([], trace)
        k = self.params.top_k
        rows = (self.search.bm25(question_id, query, k) if p.retriever == "bm25"
                else self.search.dense(question_id, query, k))
        return Outcome(rows, trace)
