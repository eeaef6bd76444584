"""Parameters of the rerankers (``rerank`` in ``params.yaml``).

Protocol (EviReform §4.1 and Table C.2): both rerankers receive the 40 passages ranked highest by
the dense retriever and may only reorder them (the CIKM CEE paper reranks a top-50 pool).
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from evichain.params_base import Section, register_block

RerankMethod = Literal["listwise", "cross_encoder"]


class CrossEncoderParams(Section):
    """A sentence-transformers ``CrossEncoder`` (EviReform: "a BGE reranker"; the CEE paper
    names ``BAAI/bge-reranker-large``). No reranker weights exist offline on this machine:
    the stage stops with a clear error unless ``model`` is a local directory or a cached
    Hugging Face snapshot."""

    model: str = "BAAI/bge-reranker-large"
    max_length: int = Field(512, ge=16, le=8192)
    batch_size: int = Field(16, ge=1, le=4096)
    device: str = "cpu"
    passage_format: str = "{title}\n{text}"


class ListwiseParams(Section):
    """The listwise LLM reranker (EviReform Listing 14, one call over the whole pool).

    ``passage_words`` caps the words of each candidate text so that 40 candidates, the
    instructions and the answer fit the local model's 8,192-token context; the prompt is then
    measured with the client's tokenizer and the cap is lowered step by step (×``shrink``)
    while it exceeds ``max_prompt_tokens`` (never below ``min_passage_words``).
    """

    passage_words: int = Field(100, ge=5, le=2000)
    min_passage_words: int = Field(20, ge=1, le=2000)
    shrink: float = Field(0.8, gt=0.0, lt=1.0)
    max_prompt_tokens: int = Field(7400, ge=256, le=1_000_000)
    on_failure: Literal["dense_order", "empty"] = "dense_order"


class RerankParams(Section):
    """The ``rerank`` section (paper defaults; unknown keys are errors)."""

    methods: list[RerankMethod] = Field(default_factory=lambda: ["listwise"])
    pool_size: int = Field(40, ge=1, le=1000)
    cross_encoder: CrossEncoderParams = CrossEncoderParams()
    listwise: ListwiseParams = ListwiseParams()


def run_name(method: str) -> str:
    """The run/trace name of a reranker: ``rerank-<method>`` (ValueError for an unknown one)."""
    known = get_args(RerankMethod)
    if method not in known:
        raise ValueError(f"unknown reranker '{method}' (known: {', '.join(known)})")
    return f"rerank-{method}"


register_block("rerank", RerankParams)
