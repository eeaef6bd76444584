"""Params of the first-stage retrievers (``retrieval`` block); composed by :mod:`evichain.config`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

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
