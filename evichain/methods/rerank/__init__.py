"""Rerankers over a dense candidate pool: cross-encoder and listwise LLM (EviReform Listing 14)."""
