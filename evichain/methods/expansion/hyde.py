"""HyDE: hypothetical document embeddings (Gao et al., "Precise Zero-Shot Dense Retrieval
without Relevance Labels", ACL 2023, §3.2).

For question q an instruction-following LLM writes N hypothetical documents d̂_1..d̂_N (N = 8,
sampled at temperature 0.7, one seed per sample: :mod:`evichain.methods.expansion.generate`).
Each is encoded with the project's encoder f, and the query vector is the mean that also counts
the question as one hypothesis (paper Eq. "v̂_q = 1/(N+1) [Σ_k f(d̂_k) + f(q)]"):

    v = (f(q) + Σ_{k ∈ ok} f(d̂_k)) / (|ok| + 1)

over the generations that succeeded (``include_question: false`` drops f(q) from the mean).
Passages are ranked by ⟨v, f(d)⟩ (dense search over the whole corpus). The paper's encoder is
Contriever; here it is ``embed.model`` (L2-normalised vectors; the mean is not re-normalised,
which leaves the ranking unchanged). No generation: see ``expansion.on_all_failed``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evichain.llm import LLMClient
from evichain.methods.base import Outcome
from evichain.methods.expansion.generate import generate, generation_trace, outcome_status, texts
from evichain.methods.expansion.params import ExpansionParams
from evichain.methods.expansion.prompts import HYDE, bounded, hyde_data, nonempty_passage
from evichain.methods.expansion.search import CorpusSearch


def hyde_vector(question_vector: np.ndarray | None, document_vectors: np.ndarray) -> np.ndarray:
    """The HyDE query vector: mean of f(q) (if given) and the document vectors (rows)."""
    parts = [document_vectors] if question_vector is None else [question_vector[None, :], document_vectors]
    parts = [p for p in parts if p.size]
    if not parts:
        raise ValueError("HyDE needs the question vector or at least one document vector")
    return np.vstack(parts).mean(axis=0)


class HyDE:
    """N sampled hypothetical documents → mean vector → dense search."""

    def __init__(self, clients: Sequence[LLMClient], search: CorpusSearch, params: ExpansionParams) -> None:
        self.clients = list(clients)
        self.search = search
        self.params = params
        self.prompt = bounded(HYDE, params.hyde.max_passage_chars)

    def query_vector(self, question: str, documents: Sequence[str]) -> np.ndarray:
        """:func:`hyde_vector` of the encoded question and documents."""
        encoded = self.search.embed([question, *documents])
        q = encoded[0] if self.params.hyde.include_question or not documents else None
        return hyde_vector(q, encoded[1:])

    def retrieve(self, question_id: str, question: str) -> Outcome:
        """Generate, average, search (module docstring)."""
        gens = generate(self.clients, self.prompt, nonempty_passage, data=hyde_data(question))
        trace = {"question_id": question_id, "method": "hyde",
                 **generation_trace(gens, self.params.on_all_failed)}
        _, _, write = outcome_status(gens, self.params.on_all_failed)
        docs = texts(gens)
        trace["n_vectors_averaged"] = (len(docs) + int(self.params.hyde.include_question or not docs)
                                       if write else 0)
        if not write:
            return Outcome([], trace)
        vector = self.query_vector(question, docs)
        return Outcome(self.search.dense_vector(question_id, vector, self.params.top_k), trace)
