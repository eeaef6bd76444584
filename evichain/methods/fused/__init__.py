"""Run-level score fusion as a registered method (ours, issues 38 and 61): ``fused``, whose
variants ``evireform-fused`` (EviReform robust ⊕ PropRAG, the ``fusion`` block) and
``seeds-fused`` (EviReform robust ⊕ CEE robust, the seed-fusion tuning record) build their
component methods through the registry and fuse their rankings per question with
:func:`evichain.retrieval.fusion.score_fusion` (:mod:`.method`; params block ``fused``,
:mod:`.params`). Light on purpose: :mod:`evichain.config` imports :mod:`.params` at every parse.
"""
