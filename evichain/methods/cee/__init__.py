"""Contrastive Evidence Exploration (CEE; CIKM '26 paper §2, DESIGN §5).

Offline (:mod:`.facets`): for every passage its nearest neighbours R_i, and per (d_i, d_r) an LLM
writes facet queries answerable from d_i but not from d_r; C_i is their union.
Online (:mod:`.explore`, :mod:`.scoring`, :mod:`.selection`, :mod:`.retrieve`): T rounds of
evidence-conditioned probe generation and K_cand retrieval per probe (Eq. 1), facet-refined
scoring (Eq. 2–6) and the greedy coverage-aware final selection (Eq. 7–8).

Modules: ``params`` (settings, variants), ``prompts`` (the facet, probe and summary prompts,
documented in ``PROMPTS.md``), ``facets`` (also the LLM-free sentence facets of variant
``robust``), ``explore``, ``bridge`` (bridge-title pool expansion, variant ``robust``),
``scoring``, ``selection``, ``retrieve``, ``tables`` (paper-shaped Table 1 / Table 2 from
metrics files).
"""
