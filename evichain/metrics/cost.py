"""LLM token cost per question from a method's trace.

Convention (every LLM method's trace, one row per question): the columns whose names end in
``prompt_tokens`` or ``completion_tokens`` (e.g. ``sel_prompt_tokens``, ``ref_completion_tokens``,
``prompt_tokens``) hold the tokens that question's LLM calls used; a cache hit counts the tokens
of the stored response, so the figure does not depend on the cache's state.

    tokens per question = mean over questions of the row sum of those columns
"""

from __future__ import annotations

import pandas as pd

_SUFFIXES = ("prompt_tokens", "completion_tokens")


def token_columns(trace: pd.DataFrame) -> list[str]:
    """The trace's token columns (see module docstring)."""
    return [c for c in trace.columns if str(c).endswith(_SUFFIXES)]


def tokens_per_question(trace: pd.DataFrame) -> float | None:
    """Mean LLM tokens per question, or None when the trace records no tokens."""
    cols = token_columns(trace)
    if not cols or trace.empty:
        return None
    return round(float(trace[cols].fillna(0).sum(axis=1).mean()), 2)
