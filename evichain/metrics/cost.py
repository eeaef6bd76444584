"""LLM token cost per question from a method's trace.

Convention (every LLM method's trace, one row per question): the columns whose names end in
``prompt_tokens`` or ``completion_tokens`` (e.g. ``sel_prompt_tokens``, ``ref_completion_tokens``,
``prompt_tokens``) hold the tokens that question's LLM calls used; a cache hit counts the tokens
of the stored response, so the figure does not depend on the cache's state.

    tokens per question = mean over questions of the row sum of those columns
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from evichain.metrics.frames import as_polars

if TYPE_CHECKING:
    import pandas as pd

_SUFFIXES = ("prompt_tokens", "completion_tokens")


def token_columns(trace: pl.DataFrame | pd.DataFrame) -> list[str]:
    """The trace's token columns (see module docstring)."""
    return [str(c) for c in trace.columns if str(c).endswith(_SUFFIXES)]


def tokens_per_question(trace: pl.DataFrame | pd.DataFrame) -> float | None:
    """Mean LLM tokens per question (missing counts as 0), rounded to 2 decimals, or None when
    the trace records no tokens. Row sums left to right, the mean summed by numpy."""
    table = as_polars(trace)
    cols = token_columns(table)
    if not cols or table.height == 0:
        return None
    filled = [(pl.col(c).fill_nan(0) if table.schema[c].is_float() else pl.col(c)).fill_null(0)
              for c in cols]
    per_q = table.select(pl.sum_horizontal(*filled).cast(pl.Float64))[:, 0].to_numpy()
    return round(float(np.mean(per_q)), 2)
