"""Params of the first-stage retrievers (``retrieval`` block); composed by :mod:`evichain.config`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from evichain.params_base import Section


class BM25Params(Section):
    """BM25 (bm25s); defaults are Anserini's (k1=0.9, b=0.4, Lucene IDF, Porter stemming)."""

    top_k: int = Field(20, ge=1, le=1000)
    k1: float = Field(0.9, gt=0.0)
    b: float = Field(0.4, ge=0.0, le=1.0)
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    stemmer: str | None = "english"
    stopwords: str | None = "en"
    passage_format: str = "{title}\n{text}"


class DenseParams(Section):
    """Dense retrieval by inner product of L2-normalised embeddings."""

    top_k: int = Field(20, ge=1, le=1000)
    passage_format: str = "{title}\n{text}"


class RetrievalParams(Section):
    bm25: BM25Params = BM25Params()
    dense: DenseParams = DenseParams()


class FusionParams(Section):
    """``fusion`` block (ours, issue 38): ``name`` = the run of ``runs`` fused with ``weights``
    (one per run, ≥ 0), ``depth`` passages kept; see :mod:`evichain.retrieval.fusion`."""

    name: str = "evireform-fused"
    runs: list[str] = Field(default_factory=lambda: ["evireform-robust", "proprag"], min_length=2)
    weights: list[float] = Field(default_factory=lambda: [0.5, 0.5])
    depth: int = Field(20, ge=1, le=1000)

    @model_validator(mode="after")
    def _one_weight_per_run(self) -> "FusionParams":
        if len(self.weights) != len(self.runs):
            raise ValueError(f"weights has {len(self.weights)} values for {len(self.runs)} runs {self.runs}")
        if len(set(self.runs)) != len(self.runs) or self.name in self.runs:
            raise ValueError(f"runs {self.runs} must be distinct and differ from name {self.name!r}")
        if any(w < 0 for w in self.weights) or sum(self.weights) <= 0:
            raise ValueError(f"weights {self.weights} must be >= 0 with a positive sum")
        return self

    def weight_of(self) -> dict[str, float]:
        """run name → weight."""
        return dict(zip(self.runs, self.weights))
