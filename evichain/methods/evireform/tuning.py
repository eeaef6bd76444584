"""Tuning of the ``robust`` and ``hybrid`` variants on a sample outside the reported ones.

Two stages, each an exhaustive grid (``evireform.tuning``):

1. ``robust``: every (backstop_eps, backfill, k_r);
2. ``hybrid``: every (coverage_pool, coverage_weight) with stage 1's choice fixed.

A configuration's value is Σ_m mean_q m(q) over the ``objective`` metrics (per-question
retrieval metrics of :mod:`evichain.metrics.retrieval`, e.g. Recall@5 + Chain@5). The choice
is the highest value; ties go to the configuration listed first (grids are listed in the
order the params give, so the simpler setting listed first wins a tie).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from evichain.methods.evireform.params import (
    EviReformParams,
    RobustParams,
    TuningParams,
)
from evichain.methods.evireform.variants import variant_params
from evichain.metrics.frames import as_polars, mean

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl

ROBUST_KEYS: tuple[str, ...] = ("backstop_eps", "backfill", "k_r")
HYBRID_KEYS: tuple[str, ...] = ("coverage_pool", "coverage_weight")


def robust_grid(t: TuningParams) -> list[dict[str, Any]]:
    """Stage 1 configurations, in params order."""
    return [dict(zip(ROBUST_KEYS, v)) for v in itertools.product(t.backstop_eps, t.backfill, t.k_r)]


def hybrid_grid(t: TuningParams, robust: dict[str, Any]) -> list[dict[str, Any]]:
    """Stage 2 configurations: stage 1's ``robust`` values with each (pool, weight)."""
    return [{**robust, **dict(zip(HYBRID_KEYS, v))}
            for v in itertools.product(t.coverage_pool, t.coverage_weight)]


def with_robust(params: EviReformParams, config: dict[str, Any]) -> EviReformParams:
    """``params`` with ``config`` merged into its ``robust`` block (validated)."""
    block = RobustParams.model_validate({**params.robust.model_dump(), **config})
    return params.model_copy(update={"robust": block})


def config_params(params: EviReformParams, variant: str, config: dict[str, Any]) -> EviReformParams:
    """The settings of ``variant`` (robust | hybrid) with ``config`` as its ``robust`` block."""
    return variant_params(with_robust(params, config), variant)


def objective_value(per_q: pl.DataFrame | pd.DataFrame, metrics: Sequence[str]) -> float:
    """Σ_m mean over questions of metric m (summed in ``metrics`` order; each mean summed by
    numpy, :func:`evichain.metrics.frames.mean`); a metric absent from ``per_q`` is an error."""
    missing = [m for m in metrics if m not in per_q.columns]
    if missing:
        raise ValueError(f"evireform.tuning.objective: unknown metric(s) {missing}; "
                         f"known: {[c for c in per_q.columns if c != 'question_id']}")
    table = as_polars(per_q[list(metrics)])
    return float(sum(mean(table[m]) for m in metrics))


def choose(table: pl.DataFrame | pd.DataFrame, keys: Sequence[str]) -> dict[str, Any]:
    """The configuration of the first row with the highest ``objective``: each of ``keys``
    read from its own column (numpy scalars as Python values)."""
    best = int(np.asarray(table["objective"].to_numpy()).argmax())
    return {k: _plain(table[k].to_numpy()[best]) for k in keys}


def _plain(value: Any) -> Any:
    """numpy scalars as Python values (for JSON and params)."""
    return value.item() if hasattr(value, "item") else value
