"""EviReform (paper §3, Appendix C): evidence-guided query reformulation over a
proposition–entity index, with shared-entity propagation and passage readout.

Modules: ``params`` (settings), ``prompts`` (Listings 11–13, 15, 16), ``extract`` (index
propositions), ``canonicalize`` (entities), ``index`` (H, A, π, |P_j|, statistics),
``propagation`` (Eq. 12–14), ``readout`` (Eq. 15), ``llm_steps`` (selection, reformulation,
judge, gap controller), ``retrieve`` (Steps 1–7 of DESIGN §4), ``variants``, ``coverage``
(Tables A.3/A.4 from traces).
"""
