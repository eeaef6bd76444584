"""EviReform × CEE hybrid (ours, issue 38): EviReform's evidence-expanded pool, CEE's
coverage-aware final selection. Neither paper compares or combines the two methods."""

from evichain.methods.hybrid.retrieve import HybridRetriever, aspect_coverage, make_retriever

__all__ = ["HybridRetriever", "aspect_coverage", "make_retriever"]
