"""Cross-encoder reranking of the dense pool (EviReform §4.1: "BGE-M3 followed by a BGE …
reranker over its Top-40 pool"; CEE paper: bge-reranker-large over the top 50).

For each (question, passage) pair of the pool a sentence-transformers ``CrossEncoder`` gives a
relevance score s(q, d); the pool is reordered by decreasing s, ties keeping the pool (dense)
order (:func:`order_by_scores`). Nothing outside the pool is added.

Weights: nothing is downloaded (``HF_HUB_OFFLINE=1``). A model is usable when
``rerank.cross_encoder.model`` is a local directory holding a model, or a hub name whose
snapshot is already in the Hugging Face cache (:func:`offline_weights_available`). No such
weights exist on this project's machine, so loading raises :class:`CrossEncoderWeightsMissing`
(a :class:`~evichain.embed.models.ModelNotFound`, reported by stages as a one-line error) and
the method is not in the default ``rerank.methods``; the report prints "not run: no offline
weights".
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evichain.embed.models import ModelNotFound
from evichain.methods.rerank.params import CrossEncoderParams
from evichain.methods.rerank.pool import Candidate

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
                "pytorch_model.bin.index.json")


class CrossEncoderWeightsMissing(ModelNotFound):
    """A cross-encoder named in params whose weights are not available offline."""


def _has_weights(directory: Path) -> bool:
    return (directory / "config.json").is_file() and any((directory / f).is_file() for f in WEIGHT_FILES)


def _cached_snapshot(model: str) -> Path | None:
    """The Hugging Face cache snapshot directory of hub name ``model``, if cached."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a dependency of sentence-transformers
        return None
    try:
        hit = try_to_load_from_cache(model, "config.json")
    except Exception:  # not a valid repo id (e.g. a missing path): not cached
        return None
    return Path(hit).parent if isinstance(hit, str) else None


def local_model_dir(model: str) -> Path | None:
    """A local directory with the weights of ``model`` (a path or a cached hub name), or None."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path if _has_weights(path) else None
    snapshot = _cached_snapshot(model)
    return snapshot if snapshot is not None and _has_weights(snapshot) else None


def offline_weights_available(model: str) -> bool:
    """Whether ``model`` can be loaded without a network (see module docstring)."""
    return local_model_dir(model) is not None


def load_cross_encoder(params: CrossEncoderParams) -> Any:
    """The ``CrossEncoder`` of ``params.model``; :class:`CrossEncoderWeightsMissing` if it has
    no offline weights."""
    directory = local_model_dir(params.model)
    if directory is None:
        raise CrossEncoderWeightsMissing(
            f"cross-encoder reranker '{params.model}' (params rerank.cross_encoder.model): no "
            "offline weights are installed (it is neither a local model directory nor a cached "
            "Hugging Face snapshot, and this machine cannot download it). Point "
            "rerank.cross_encoder.model at a local CrossEncoder directory, or remove "
            "cross_encoder from rerank.methods.")
    from sentence_transformers import CrossEncoder

    return CrossEncoder(str(directory), device=params.device, max_length=params.max_length,
                        local_files_only=True)


def order_by_scores(scores: Sequence[float]) -> list[int]:
    """Pool positions by decreasing score; equal scores keep the pool order (stable sort)."""
    return sorted(range(len(scores)), key=lambda i: -float(scores[i]))


@dataclass
class CrossEncoderResult:
    """The reordered pool of one question and the model's score of each pool passage."""

    order: list[str]
    scores: list[float]


class CrossEncoderReranker:
    """s(q, d) for every pool passage, then :func:`order_by_scores` (one model, one lock:
    torch already uses every core for a batch)."""

    def __init__(self, model: Any, params: CrossEncoderParams) -> None:
        self.model = model
        self.params = params
        self._lock = threading.Lock()

    def pair_text(self, candidate: Candidate) -> str:
        """The passage side of a pair (``passage_format``)."""
        return self.params.passage_format.format(title=candidate.title, text=candidate.text)

    def rerank(self, question: str, pool: Sequence[Candidate]) -> CrossEncoderResult:
        """Score the pool and reorder it."""
        if not pool:
            return CrossEncoderResult([], [])
        pairs = [(question, self.pair_text(c)) for c in pool]
        with self._lock:
            raw = self.model.predict(pairs, batch_size=self.params.batch_size,
                                     show_progress_bar=False, convert_to_numpy=True)
        scores = [float(s) for s in raw]
        return CrossEncoderResult([pool[i].passage_id for i in order_by_scores(scores)], scores)
