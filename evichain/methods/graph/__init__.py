"""Graph retrievers, re-implemented on the project's spine: HippoRAG 2 (Gutiérrez et al. 2025),
CatRAG (Lau et al. 2026) and PropRAG (Wang & Han 2025), sharing one extracted index as the
EviReform paper's Appendix C.6 describes.

Modules: ``params`` (settings), ``prompts`` (OpenIE, recognition memory, query NER, edge
scoring), ``openie`` (the shared triple index: LLM or LLM-free from EviReform propositions),
``graph`` (entity / passage nodes, relation, synonymy and passage–entity edges as scipy sparse
matrices), ``ppr`` (Personalized PageRank: igraph PRPACK and sparse power iteration), ``llm``
(the query-time LLM calls and their repairs), ``hipporag2``, ``catrag``, ``proprag``.
"""
