"""Text utilities shared by methods and index builders (no LLM, no embeddings)."""
