"""LameR: "Large Language Models are Strong Zero-Shot Retriever" (Shen et al., 2024, §3).

1. BM25 retrieves the top M = 10 candidates for q in the target collection.
2. The LLM sees q with those candidates ("its possible answering passages, most of these
   passages are wrong", enumerated) and writes N = 5 answering passages a_1..a_N (sampled, one
   seed per sample: :mod:`evichain.methods.expansion.generate`). Candidates are cut to
   ``candidate_words`` words each so that ten fit the local model's context.
3. The answers augment the query, q̄ = concat(q, a_1, q, a_2, …, q, a_N) (the paper's
   interleaving, ``query_layout: interleaved``; ``appended`` = concat(q, a_1, …, a_N)), and BM25
   retrieves again over the whole collection (:func:`augmented_query`).

No answer at all: see ``expansion.on_all_failed`` (the second pass is then plain BM25 on q).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


from evichain.llm import LLMClient
from evichain.methods.base import Outcome
from evichain.methods.expansion.generate import generate, generation_trace, outcome_status, texts
from evichain.methods.expansion.params import ExpansionParams
from evichain.methods.expansion.prompts import LAMER, bounded, lamer_data, nonempty_passage
from evichain.methods.expansion.search import CorpusSearch


def cap_words(text: str, words: int) -> str:
    """The first ``words`` whitespace-separated words of ``text``."""
    return " ".join(text.split()[:words])


def augmented_query(question: str, answers: Sequence[str], layout: str) -> str:
    """q̄: ``interleaved`` = q a_1 q a_2 … q a_N; ``appended`` = q a_1 … a_N; q without answers."""
    if layout == "interleaved" and answers:
        return " ".join(part for a in answers for part in (question, a))
    return " ".join([question, *answers])


class LameR:
    """BM25 candidates → N answers → augmented query → BM25."""

    def __init__(self, clients: Sequence[LLMClient], search: CorpusSearch, params: ExpansionParams,
                 corpus: Mapping[str, tuple[str, str]]) -> None:
        self.clients = list(clients)
        self.search = search
        self.params = params
        self.corpus = corpus  # passage_id -> (title, text): passage_texts
        self.prompt = bounded(LAMER, params.lamer.max_passage_chars)

    def candidate_text(self, passage_id: str) -> str:
        """``title: first words of text`` of a candidate."""
        title, text = self.corpus[passage_id]
        return f"{title}: {cap_words(text, self.params.lamer.candidate_words)}"

    def retrieve(self, question_id: str, question: str) -> Outcome:
        """The two BM25 passes around the LLM (module docstring)."""
        p = self.params.lamer
        first = self.search.bm25(question_id, question, p.n_candidates) if p.n_candidates else []
        candidate_ids = [pid for _, _, pid, _ in first]
        gens = generate(self.clients, self.prompt, nonempty_passage,
                        data=lamer_data(question, [self.candidate_text(c) for c in candidate_ids]))
        trace = {"question_id": question_id, "method": "lamer", "candidate_ids": candidate_ids,
                 **generation_trace(gens, self.params.on_all_failed)}
        _, _, write = outcome_status(gens, self.params.on_all_failed)
        query = augmented_query(question, texts(gens), p.query_layout)
        trace["expanded_query"] = query if write else ""
        if not write:
            return Outcome([], trace)
        return Outcome(self.search.bm25(question_id, query, self.params.top_k), trace)
