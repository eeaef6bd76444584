"""EviReform variants as named overrides of one params block (Appendix A.2, A.4; no code copies).

``full`` is the ``evireform`` block of ``params.yaml`` as written (the paper's configuration);
every other variant overrides switches only, so sweeps of α, β, k_r and L apply to all.

| variant          | reformulation | propagation | other                                  |
|------------------|---------------|-------------|----------------------------------------|
| base             | off           | off         | seed b only                            |
| reform_only      | on            | off         |                                        |
| prop_only        | off           | on          |                                        |
| full             | as params     | as params   | as params                              |
| residual_only    | on            | on          | s = r                                  |
| repeat_question  | on            | on          | residual channel = question, |V|·k_r   |
| reorder          | off           | off         | Listing 15 judge over ≤ 40 pool passages |
| rounds3          | on            | on          | ≤ 3 rounds with Listing 16 (Eq. 19)    |
| base_top         | off           | off         | LLM-free: selection = top candidates   |
| prop_only_top    | off           | on          | LLM-free: selection = top candidates   |
| robust (ours)    | on            | on          | + backstop, backfill, tail by score, robust.k_r |
| hybrid (ours)    | on            | on          | robust + coverage-aware final selection |

``robust`` and ``hybrid`` (issue 38, not in the paper) take their values from the
``evireform.robust`` block (tuned outside the reported samples). Their LLM calls are exactly
``full``'s (same candidates, same E_q from the LLM's ids, same reformulation prompt), so they
replay from ``full``'s recorded answers with 0 model calls.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from evichain.params_base import ParamsError
from evichain.methods.evireform.params import EviReformParams

_ONE_ROUND: dict[str, Any] = {"rounds": 1, "residual_only": False, "repeat_question": False,
                              "reorder": False}

VARIANTS: dict[str, dict[str, Any]] = {
    "base": {**_ONE_ROUND, "reformulation": False, "propagation": False},
    "reform_only": {**_ONE_ROUND, "reformulation": True, "propagation": False},
    "prop_only": {**_ONE_ROUND, "reformulation": False, "propagation": True},
    "full": {},
    "residual_only": {**_ONE_ROUND, "reformulation": True, "propagation": True, "residual_only": True},
    "repeat_question": {**_ONE_ROUND, "reformulation": True, "propagation": True,
                        "repeat_question": True},
    "reorder": {**_ONE_ROUND, "reformulation": False, "propagation": False, "reorder": True},
    "rounds3": {**_ONE_ROUND, "reformulation": True, "propagation": True, "rounds": 3},
    "base_top": {**_ONE_ROUND, "reformulation": False, "propagation": False, "selection": "top"},
    "prop_only_top": {**_ONE_ROUND, "reformulation": False, "propagation": True, "selection": "top"},
}

LLM_FREE: frozenset[str] = frozenset({"base_top", "prop_only_top"})
OURS: frozenset[str] = frozenset({"robust", "hybrid"})
"""Variants of ours (issue 38) whose values come from ``evireform.robust``."""


def robust_overrides(params: EviReformParams, variant: str) -> dict[str, Any]:
    """The switches of ``robust`` / ``hybrid``: ``full``'s steps plus the ``robust`` block."""
    r = params.robust
    return {**_ONE_ROUND, "reformulation": True, "propagation": True, "selection": "llm",
            "backstop_eps": r.backstop_eps, "backfill": r.backfill, "tail_order": "score",
            "k_r": r.k_r, "coverage_pool": r.coverage_pool, "coverage_weight": r.coverage_weight,
            "final": "coverage" if variant == "hybrid" else "readout"}


def variant_params(params: EviReformParams, variant: str) -> EviReformParams:
    """``params`` with the switches of ``variant`` applied (validated again)."""
    if variant not in VARIANTS and variant not in OURS:
        known = sorted([*VARIANTS, *OURS])
        raise ParamsError(f"unknown EviReform variant '{variant}'; known: {known}")
    overrides = robust_overrides(params, variant) if variant in OURS else VARIANTS[variant]
    try:
        return EviReformParams.model_validate({**params.model_dump(), **overrides})
    except ValidationError as exc:
        msg = "; ".join(e["msg"] for e in exc.errors())
        raise ParamsError(f"variant '{variant}' is inconsistent with params evireform: {msg}") from None


def uses_llm(params: EviReformParams) -> bool:
    """Whether retrieval with ``params`` makes LLM calls (selection, reformulation, judge)."""
    return params.selection == "llm" or params.reformulation or params.reorder
