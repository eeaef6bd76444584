"""Parameters of the query expansion baselines (``expansion`` in ``params.yaml``).

The CIKM CEE paper (Table 1) compares HyDE, query2doc and LameR with the same encoder and LLM
for every method; each method's own paper fixes its mechanics and defaults (cited per field).
The retrievers are the project's plain ones (``retrieval.bm25``, ``retrieval.dense`` passage
format, ``embed.model``), so an expansion method differs from its plain retriever only by the
query.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from evichain.params_base import Section, register_block

ExpansionMethod = Literal["hyde", "query2doc", "lamer"]


class HydeParams(Section):
    """HyDE (Gao et al., ACL 2023): N sampled hypothetical documents, v = mean(f(q), f(d̂_1..N))."""

    n_samples: int = Field(8, ge=1, le=64)             # paper: N = 8 generations per query
    temperature: float = Field(0.7, ge=0.0, le=2.0)    # paper: InstructGPT sampled at 0.7
    include_question: bool = True                      # paper: f(q) is one of the averaged vectors
    max_passage_chars: int = Field(1500, ge=50, le=20000)  # bound in the sent schema (llm.max_tokens)


class Query2DocParams(Section):
    """query2doc (Wang et al., EMNLP 2023): one few-shot pseudo-document d'.

    sparse q⁺ = concat(q × ``query_repeats``, d'); dense q⁺ = q + ``dense_separator`` + d'.
    ``retriever: dense``: the CEE comparison (the one setting that names query2doc) runs every
    baseline with its dense encoder; EviReform Appendix C has no query2doc protocol.
    """

    retriever: Literal["dense", "bm25"] = "dense"
    query_repeats: int = Field(5, ge=1, le=20)         # paper: the query repeated 5 times (BM25)
    dense_separator: str = " [SEP] "                   # paper: q [SEP] d' for dense retrievers
    n_examples: int = Field(4, ge=0, le=4)             # paper: 4 in-context examples
    temperature: float = Field(0.0, ge=0.0, le=2.0)    # one document; project default (App. C)
    max_passage_chars: int = Field(700, ge=50, le=20000)  # bound in the sent schema (~150 tokens)


class LameRParams(Section):
    """LameR (Shen et al., 2024): answers written from the BM25 candidates, BM25 again."""

    n_candidates: int = Field(10, ge=0, le=100)        # paper: M = 10 in-domain candidates
    n_answers: int = Field(5, ge=1, le=32)             # paper: N = 5 generated answers
    temperature: float = Field(0.7, ge=0.0, le=2.0)    # sampled; value not given in our sources
    candidate_words: int = Field(100, ge=5, le=2000)   # words per candidate in the prompt (context)
    query_layout: Literal["interleaved", "appended"] = "interleaved"  # paper: q a1 q a2 … q aN
    max_passage_chars: int = Field(700, ge=50, le=20000)


class ExpansionParams(Section):
    """The ``expansion`` section (paper defaults; unknown keys are errors)."""

    methods: list[ExpansionMethod] = Field(default_factory=lambda: ["hyde", "query2doc", "lamer"])
    top_k: int = Field(20, ge=1, le=1000)              # run depth (evaluation: K ≤ 20)
    # Every generation of a question failed: "question_only" retrieves with the question alone
    # (status failed, fallback=True, counted); "empty" writes no run rows for it.
    on_all_failed: Literal["question_only", "empty"] = "question_only"
    hyde: HydeParams = HydeParams()
    query2doc: Query2DocParams = Query2DocParams()
    lamer: LameRParams = LameRParams()


def check_method(method: str) -> str:
    """``method`` unchanged, or a ValueError naming the known expansion methods."""
    known = get_args(ExpansionMethod)
    if method not in known:
        raise ValueError(f"unknown expansion method '{method}' (known: {', '.join(known)})")
    return method


def sampling_of(method: str, params: ExpansionParams) -> tuple[float, int]:
    """(temperature, number of samples) of a method."""
    if method == "hyde":
        return params.hyde.temperature, params.hyde.n_samples
    if method == "lamer":
        return params.lamer.temperature, params.lamer.n_answers
    return params.query2doc.temperature, 1


def retrievers_of(method: str, params: ExpansionParams) -> tuple[bool, bool]:
    """(needs BM25, needs dense) for a method."""
    if method == "hyde":
        return False, True
    if method == "lamer":
        return True, False
    return params.query2doc.retriever == "bm25", params.query2doc.retriever == "dense"


register_block("expansion", ExpansionParams)
