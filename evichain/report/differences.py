"""Paired differences of every method against the strongest baseline of each dataset (the data of
``reports/figures/paired_differences.png`` and of the dataset pages' difference tables).

Reference (:func:`strongest_baseline`): among the baselines of a dataset (methods of
:data:`~evichain.report.families.BASELINE_FAMILIES`: not EviReform, CEE or a variant of ours)
with a per-question table, the one with the highest mean :data:`PRIMARY_METRIC` over its
evaluated questions (EviReform §4.2: "the primary cutoff is K = 5"); a tie goes to the higher
mean :data:`TIE_BREAK_METRIC`, then to the first name in alphabetical order.

For dataset D, method m, reference r and metric k, over the questions both m and r were
evaluated on: Δ = mean_q (k_m(q) − k_r(q)) in points with its 95% paired-bootstrap interval,
computed by the report's contrast code (:func:`evichain.report.ablations.paired_contrasts`,
``n_resamples`` resamples, seed ``seed_for(D, k)``), so each row equals
``scripts/compare_methods.py D m r``. IRCoT, Self-Ask and S2G-RAG have no ranking metrics here
(:func:`~evichain.report.main_report.without_unranked_recall`). :func:`drawable` keeps the rows
computed on at least ``min_questions`` questions (the figure's rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from evichain.report.ablations import paired_contrasts
from evichain.report.families import OURS, is_baseline
from evichain.report.main_report import without_unranked_recall

PRIMARY_METRIC = "Recall@5"
"""The metric that names the strongest baseline (EviReform §4.2: primary cutoff K = 5)."""

TIE_BREAK_METRIC = "Chain@5"
"""Breaks a tie of :data:`PRIMARY_METRIC` means (the complete chain at the same cutoff)."""

FIGURE_METRICS: tuple[str, ...] = ("Recall@5", "Chain@5")

REFERENCE_RULE = (f"the method that is not EviReform, CEE or a variant of ours with the highest "
                  f"mean {PRIMARY_METRIC} over its evaluated questions (a tie "
                  f"goes to the higher {TIE_BREAK_METRIC}, then to the name first in alphabetical "
                  "order)")
"""The rule of :func:`strongest_baseline`, as the report states it."""


def _mean(table: pl.DataFrame, metric: str) -> float:
    """Mean of ``metric`` over the table's questions (nulls left out); -inf without the column
    or any value, so such a method never wins a comparison."""
    if metric not in table.columns:
        return float("-inf")
    value = table[metric].mean()
    return float("-inf") if value is None else float(value)  # type: ignore[arg-type]


def strongest_baseline(per_q: Mapping[str, pl.DataFrame], ours: Sequence[str] = OURS,
                       metric: str = PRIMARY_METRIC, tie_break: str = TIE_BREAK_METRIC) -> str | None:
    """The baseline (:func:`~evichain.report.families.is_baseline`) with the highest mean
    ``metric`` in its per-question table; ties: higher mean ``tie_break``, then name. None when
    no baseline has a ``metric`` column."""
    tables = without_unranked_recall(per_q)
    candidates = [m for m, t in tables.items() if is_baseline(m, ours) and metric in t.columns]
    if not candidates:
        return None
    return min(candidates, key=lambda m: (-_mean(tables[m], metric), -_mean(tables[m], tie_break), m))


def difference_frame(per_q: Mapping[str, pl.DataFrame], dataset: str, reference: str,
                     metrics: Sequence[str] = FIGURE_METRICS, n_resamples: int = 10_000
                     ) -> pl.DataFrame:
    """One row per (method, metric) with a per-question table and that metric: ``dataset``,
    ``method``, ``reference``, ``metric``, ``n``, both means, ``difference``, ``ci_low``,
    ``ci_high`` (points). ``reference`` without a per-question table is a ``ValueError``."""
    tables = without_unranked_recall(per_q)
    if reference not in tables:
        raise ValueError(f"reference {reference!r} has no per-question ranking table on {dataset} "
                         f"(tables: {sorted(tables)})")
    parts = [paired_contrasts({method: table, reference: tables[reference]}, dataset,
                              [(f"{method} − {reference}", method, reference)], [metric], n_resamples)
             for method, table in tables.items() if method != reference
             for metric in metrics if metric in table.columns and metric in tables[reference].columns]
    parts = [p for p in parts if p.height]
    if not parts:
        return pl.DataFrame()
    out = pl.concat(parts).rename({"a": "method", "b": "reference", "a_mean": "method_mean",
                                   "b_mean": "reference_mean"})
    return out.select(pl.lit(dataset).alias("dataset"), pl.exclude("contrast"))


def baseline_differences(per_q: Mapping[str, pl.DataFrame], dataset: str, ours: Sequence[str] = OURS,
                         metrics: Sequence[str] = FIGURE_METRICS, n_resamples: int = 10_000
                         ) -> pl.DataFrame:
    """:func:`difference_frame` against :func:`strongest_baseline`; empty when the dataset has
    no baseline with a :data:`PRIMARY_METRIC` column."""
    reference = strongest_baseline(per_q, ours)
    if reference is None:
        return pl.DataFrame()
    return difference_frame(per_q, dataset, reference, metrics, n_resamples)


def drawable(diffs: pl.DataFrame, min_questions: int) -> pl.DataFrame:
    """The rows of :func:`difference_frame` computed on at least ``min_questions`` paired
    questions (the figure draws no interval over fewer)."""
    return diffs.filter(pl.col("n") >= min_questions) if diffs.height else diffs
