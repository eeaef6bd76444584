"""Retrieval methods built on the shared index, LLM and embedding services (one package each)."""
