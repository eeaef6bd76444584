"""Embedding service: offline sentence-transformers models with an on-disk vector cache."""

from evichain.embed.encoder import Embedder, EmbeddingCache, get_embedder
from evichain.embed.models import ModelNotFound, resolve_model_path

__all__ = ["Embedder", "EmbeddingCache", "ModelNotFound", "get_embedder", "resolve_model_path"]
