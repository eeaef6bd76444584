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
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from evichain.config import ParamsError
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


def variant_params(params: EviReformParams, variant: str) -> EviReformParams:
    """``params`` with the switches of ``variant`` applied (validated again)."""
    if variant not in VARIANTS:
        raise ParamsError(f"unknown EviReform variant '{variant}'; known: {sorted(VARIANTS)}")
    try:
        return EviReformParams.model_validate({**params.model_dump(), **VARIANTS[variant]})
    except ValidationError as exc:
        msg = "; ".join(e["msg"] for e in exc.errors())
        raise ParamsError(f"variant '{variant}' is inconsistent with params evireform: {msg}") from None


def uses_llm(params: EviReformParams) -> bool:
    """Whether retrieval with ``params`` makes LLM calls (selection, reformulation, judge)."""
    return params.selection == "llm" or params.reformulation or params.reorder
