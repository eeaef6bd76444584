"""Paired differences of every method against one reference method per dataset (the data of
``reports/figures/paired_differences.png``).

For dataset D, method m, reference r and metric k, over the questions both m and r were
evaluated on: Δ = mean_q (k_m(q) − k_r(q)) in points with its 95% paired-bootstrap interval,
computed by the report's contrast code (:func:`evichain.report.ablations.paired_contrasts`,
``n_resamples`` resamples, seed ``seed_for(D, k)``), so each row equals
``scripts/compare_methods.py D m r``. The reference is ``report.reference_method`` where it
has a per-question table on D, else :data:`FALLBACK_REFERENCE` (named in the figure).
Iterative methods have no ranking metrics here (:func:`without_unranked_recall`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import polars as pl

from evichain.report.ablations import paired_contrasts
from evichain.report.main_report import without_unranked_recall

FALLBACK_REFERENCE = "dense"
"""Reference on a dataset where the configured one has no per-question table: the first-stage
retriever most methods here start from."""

FIGURE_METRICS: tuple[str, ...] = ("Recall@5", "Chain@5")


def reference_of(tables: Mapping[str, pl.DataFrame], reference: str) -> str | None:
    """``reference`` if it has a per-question table, else :data:`FALLBACK_REFERENCE` if that
    has one, else None."""
    for name in (reference, FALLBACK_REFERENCE):
        if name in tables:
            return name
    return None


def reference_differences(per_q: Mapping[str, pl.DataFrame], dataset: str, reference: str,
                          metrics: Sequence[str] = FIGURE_METRICS, n_resamples: int = 10_000
                          ) -> pd.DataFrame:
    """:func:`difference_frame` as pandas (no column when empty). pandas only for
    stages/report.py, which concatenates and filters these rows with pandas (not migrated)."""
    frame = difference_frame(per_q, dataset, reference, metrics, n_resamples)
    return frame.to_pandas() if frame.height else pd.DataFrame()


def difference_frame(per_q: Mapping[str, pl.DataFrame], dataset: str, reference: str,
                     metrics: Sequence[str] = FIGURE_METRICS, n_resamples: int = 10_000
                     ) -> pl.DataFrame:
    """One row per (method, metric) with a per-question table and that metric: ``dataset``,
    ``method``, ``reference``, ``metric``, ``n``, both means, ``difference``, ``ci_low``,
    ``ci_high`` (points). Empty when no reference (see :func:`reference_of`) is available."""
    tables = without_unranked_recall(per_q)
    ref = reference_of(tables, reference)
    if ref is None:
        return pl.DataFrame()
    parts = [paired_contrasts({method: table, ref: tables[ref]}, dataset,
                              [(f"{method} − {ref}", method, ref)], [metric], n_resamples)
             for method, table in tables.items() if method != ref
             for metric in metrics if metric in table.columns and metric in tables[ref].columns]
    parts = [p for p in parts if p.height]
    if not parts:
        return pl.DataFrame()
    out = pl.concat(parts).rename({"a": "method", "b": "reference", "a_mean": "method_mean",
                                   "b_mean": "reference_mean"})
    return out.select(pl.lit(dataset).alias("dataset"), pl.exclude("contrast"))
