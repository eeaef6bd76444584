"""Retrieval, QA and bootstrap metrics (DESIGN.md §6)."""
