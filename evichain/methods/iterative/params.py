"""Parameters of the iterative retrieval baselines (``iterative`` in ``params.yaml``).

Protocol (EviReform §4.1 and Appendix C): every baseline retrieves with the dense retriever
(BGE-M3 in the paper; the project embedder ``embed.model`` here), LLM decoding at temperature 0,
and its final evidence is read by the shared reader within a 3,000-token budget (``read.*``).
``retriever: bm25`` switches every method to BM25 (``retrieval.bm25``), as IRCoT and GeAR
used originally.

Each method has its own block. Where a default comes from the method's own paper it says so;
where neither that paper (as far as it is available offline here) nor the EviReform text gives
a value (EviReform's Table C.2 body is not in the extracted text), the docstring says
"our choice".
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from evichain.params_base import Section, register_block

MethodName = Literal["ircot", "self_ask", "s2g_rag", "gear"]
METHODS: tuple[str, ...] = ("ircot", "self_ask", "s2g_rag", "gear")
# Methods that read the EviReform proposition–entity index as well as the corpus (their DVC stage
# is ``retrieve_iterative_graph@<ds>-<m>``, the others' ``retrieve_iterative@<ds>-<m>``).
GRAPH_METHODS: frozenset[str] = frozenset({"gear"})


def retrieve_stage_name(dataset: str, method: str) -> str:
    """The DVC stage that runs ``method`` on ``dataset`` (see :data:`GRAPH_METHODS`)."""
    family = "retrieve_iterative_graph" if method in GRAPH_METHODS else "retrieve_iterative"
    return f"{family}@{dataset}-{method}"


class IRCoTParams(Section):
    """IRCoT (Trivedi et al., ACL 2023; EviReform Listing 5).

    * ``k``: paragraphs retrieved per query (the question, then each CoT sentence). The paper
      tunes K ∈ {2, 4, 6, 8} per dataset on held-out questions; 4 is our fixed choice.
    * ``max_steps``: reasoning sentences at most (the paper: 8). The last one is generated
      with ``final_round: true`` (Listing 5).
    * ``max_paragraphs``: cap on collected paragraphs (the paper: 15).
    """

    k: int = Field(4, ge=1, le=100)
    max_steps: int = Field(8, ge=1, le=50)
    max_paragraphs: int = Field(15, ge=1, le=200)


class SelfAskParams(Section):
    """Self-Ask with a retriever (Press et al., Findings EMNLP 2023; no EviReform listing).

    * ``max_follow_ups``: follow-up questions at most (the paper gives no limit; 5 is ours).
    * ``k``: passages retrieved per follow-up; the intermediate answer is read from them (the
      paper used a search engine's answer box; our choice: 5).
    * ``question_retrieval``: also retrieve ``k`` passages for the original question first
      (off in the paper, where only follow-ups are searched).
    """

    max_follow_ups: int = Field(5, ge=1, le=20)
    k: int = Field(5, ge=1, le=100)
    question_retrieval: bool = False


class S2GRAGParams(Section):
    """S2G-RAG (Li et al., ACL 2026; EviReform Listings 6-7).

    * ``k``: documents retrieved per turn (our choice: 5).
    * ``max_turns``: retrieval turns at most (our choice: 4).
    * ``max_sentences``: K of Listing 7, sentences selected per turn (our choice: 5).
    * ``exclude_seen``: later turns retrieve only documents not retrieved before (our reading
      of gap-directed retrieval: a gap query asks for new evidence).
    * ``gap_query``: how gap items become the next query: ``target_slot`` joins each item's
      "target slot" (its description when both are empty); ``description`` joins descriptions.
    """

    k: int = Field(5, ge=1, le=100)
    max_turns: int = Field(4, ge=1, le=20)
    max_sentences: int = Field(5, ge=1, le=100)
    exclude_seen: bool = True
    gap_query: Literal["target_slot", "description"] = "target_slot"


class GeARParams(Section):
    """GeAR (Shen et al., Findings ACL 2025; EviReform Listings 8-10) over the EviReform
    proposition–entity index (the departure is documented in :mod:`..gear`).

    * ``k``: passages of the base retriever per step (our choice: 5).
    * ``max_steps``: agent iterations at most (our choice: 4).
    * ``link_k``: index propositions each proximal triple links to (our choice: 1).
    * ``beam_size`` / ``hops``: the beam search of the graph expansion (our choice: 5 / 2).
    * ``memory_passages``: new passages of a step shown to the gist-memory update (Listing 9).
    * ``run_order``: the run table ranks passages in the final evidence order (passages that
      support the gist memory first: GeAR's merged output) or by first retrieval.
    """

    k: int = Field(5, ge=1, le=100)
    max_steps: int = Field(4, ge=1, le=20)
    link_k: int = Field(1, ge=1, le=20)
    beam_size: int = Field(5, ge=1, le=100)
    hops: int = Field(2, ge=0, le=5)
    memory_passages: int = Field(10, ge=1, le=100)
    run_order: Literal["evidence", "first_retrieval"] = "evidence"


class IterativeParams(Section):
    """The ``iterative`` section (paper defaults; unknown keys are errors).

    ``methods``: which baselines the DVC matrix runs; ``retriever``: ``dense`` (the EviReform
    protocol) or ``bm25``; ``passage_format``: how a passage is embedded for dense retrieval.
    """

    methods: list[MethodName] = Field(default_factory=lambda: list(METHODS))
    retriever: Literal["dense", "bm25"] = "dense"
    passage_format: str = "{title}\n{text}"
    ircot: IRCoTParams = IRCoTParams()
    self_ask: SelfAskParams = SelfAskParams()
    s2g_rag: S2GRAGParams = S2GRAGParams()
    gear: GeARParams = GeARParams()

    @field_validator("methods")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("methods must not repeat")
        return v


register_block("iterative", IterativeParams)
