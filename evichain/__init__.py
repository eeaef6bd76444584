"""evichain: a reproducible pipeline for multi-hop evidence retrieval.

Layers (one direction): ``evichain`` (this library: data, LLM client, embeddings, retrieval
methods, metrics, reports) <- ``flows`` (Prefect fan-out) <- ``stages`` (DVC entry points).
The library knows nothing about DVC or Prefect.
"""

__version__ = "0.1.0"
