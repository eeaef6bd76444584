"""Iterative retrieval baselines: IRCoT, Self-Ask, S2G-RAG and GeAR.

One module per method (``ircot``, ``self_ask``, ``s2g_rag``, ``gear`` with ``gear_graph``);
``common`` holds search, the per-question episode and the output rows; ``prompts`` the EviReform
Listings 5-10 and our Self-Ask prompt; ``registry`` builds a method by name; ``method``
registers them (:mod:`evichain.methods.base`).
"""
