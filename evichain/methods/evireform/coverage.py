"""Analyses from EviReform traces: pool coverage (Appendix A.3, Tables A.3/A.4), selection
survival and tokens per question (Appendix A.5).

Pools (trace columns written by :mod:`.retrieve`): C₀ = the first 20 distinct source
passages of the question's top-100 propositions; C₊ = C₀ plus the source passages of the
propositions retrieved by residual queries (passages reached only by propagation excluded).

* Table A.3: gold-passage coverage (mean per question of |G ∩ C| / |G|) and complete-chain
  coverage (share of questions with G ⊆ C) of C₀ and C₊, in percent.
* Table A.4: among questions whose C₀ misses at least one gold passage: how many C₊ makes
  complete, how many gain gold but stay incomplete, how many gain nothing, and the number of
  newly added gold passage occurrences.

Questions without gold passages (GraphRAG-Bench Medical) are left out.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd


def _with_gold(traces: pd.DataFrame, question_ids: Iterable[str] | None) -> pd.DataFrame:
    t = traces[traces["n_gold"] > 0]
    if question_ids is not None:
        t = t[t["question_id"].isin(set(question_ids))]
    return t


def coverage_table(traces: pd.DataFrame, question_ids: Iterable[str] | None = None) -> pd.DataFrame:
    """Table A.3: coverage of C₀ ("initial") and C₊ ("+residual"), percent."""
    t = _with_gold(traces, question_ids)
    rows = []
    for pool, gold, complete in (("initial (C0)", "c0_gold", "c0_complete"),
                                 ("+residual (C+)", "cplus_gold", "cplus_complete")):
        rows.append({"pool": pool, "questions": len(t),
                     "gold_coverage": _pct((t[gold] / t["n_gold"]).mean()),
                     "complete_chain": _pct(t[complete].astype(float).mean())})
    return pd.DataFrame(rows)


def transition_table(traces: pd.DataFrame, question_ids: Iterable[str] | None = None) -> pd.DataFrame:
    """Table A.4: transitions among pools whose C₀ misses at least one gold passage."""
    t = _with_gold(traces, question_ids)
    missing = t[~t["c0_complete"].astype(bool)]
    gained = missing["cplus_gold"] > missing["c0_gold"]
    complete = missing["cplus_complete"].astype(bool)
    return pd.DataFrame([{
        "pools_missing_gold": len(missing),
        "became_complete": int(complete.sum()),
        "gained_but_incomplete": int((gained & ~complete).sum()),
        "unchanged": int((~gained).sum()),
        "new_gold_passages": int((missing["cplus_gold"] - missing["c0_gold"]).sum()),
    }])


def selection_table(traces: pd.DataFrame, question_ids: Iterable[str] | None = None) -> pd.DataFrame:
    """Selection survival: gold passages among the candidates vs. among the observed E_q,
    fallbacks, invalid ids and selection sizes (DESIGN §4: small selectors lose gold here)."""
    t = _with_gold(traces, question_ids)
    n_gold = t["n_gold"].sum()
    return pd.DataFrame([{
        "questions": len(t),
        "gold_in_candidates_pct": _pct(t["gold_in_candidates"].sum() / n_gold if n_gold else 0.0),
        "gold_selected_pct": _pct(t["gold_selected"].sum() / n_gold if n_gold else 0.0),
        "selection_fallback_pct": _pct(t["selection_fallback"].astype(float).mean()),
        "residual_fallback_pct": _pct(t["residual_fallback"].astype(float).mean()),
        "mean_selected": round(float(t["selected_ids"].map(len).mean()), 2) if len(t) else 0.0,
        "invalid_ids": int(t["n_invalid_ids"].sum()),
    }])


def token_table(traces: pd.DataFrame) -> pd.DataFrame:
    """Mean tokens per question for selection, reformulation and the judge (Appendix A.5)."""
    out = {}
    for step in ("sel", "ref", "judge"):
        p, c = traces[f"{step}_prompt_tokens"], traces[f"{step}_completion_tokens"]
        out[f"{step}_prompt"] = round(float(p.mean()), 1) if len(traces) else 0.0
        out[f"{step}_completion"] = round(float(c.mean()), 1) if len(traces) else 0.0
    out["total"] = round(sum(v for v in out.values()), 1)
    return pd.DataFrame([out])


def _pct(x: float) -> float:
    return round(100.0 * float(x), 2) if pd.notna(x) else 0.0
