"""Iterative retrieval baselines: IRCoT, Self-Ask, S2G-RAG and GeAR."""
