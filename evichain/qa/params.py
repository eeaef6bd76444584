"""Params of the shared QA reader (``read`` block); composed by :mod:`evichain.config`."""

from __future__ import annotations

from pydantic import Field

from evichain.params_base import Section


class ReadParams(Section):
    """The shared QA reader (EviReform §4.2, C.10 Listing 4)."""

    context_k: int = Field(5, ge=1, le=100)
    budget_tokens: int = Field(3000, ge=100, le=100000)
    max_failure_rate: float = Field(0.2, ge=0.0, le=1.0)
