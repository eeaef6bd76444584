"""Paired bootstrap difference of two evaluated methods on one dataset (``evichain
compare-methods``).

For each metric, ``mean(a − b)`` in points over the questions both methods were evaluated on
(inner join on ``question_id`` of ``reports/eval/<dataset>/<method>.parquet``), with the 95%
percentile interval of 10,000 paired resamples, computed by the report's own contrast code
(:func:`evichain.report.ablations.paired_contrasts`: seed ``seed_for(dataset, metric)``), so a
contrast printed here and one printed in ``reports/README.md`` agree when they compare the same
cells. :func:`group_means` adds both methods' means per group of questions (any column of
``artifacts/<dataset>/questions.parquet``; no interval: the groups are small).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from evichain.io import read_table
from evichain.metrics.frames import as_polars
from evichain.report.ablations import difference_ci, paired_contrasts
from evichain.report.tables import render_plain_markdown

if TYPE_CHECKING:
    import pandas as pd  # the questions of `evichain compare-methods` (evichain/cli.py) come as pandas

DEFAULT_METRICS = ("Recall@2", "Recall@5", "Recall@10", "Chain@5", "MAP@10", "nDCG@10")


def _table(eval_dir: Path, dataset: str, method: str) -> pl.DataFrame:
    """``<eval_dir>/<dataset>/<method>.parquet``, failing with the path when it is missing."""
    return read_table(eval_dir / dataset / f"{method}.parquet")


def contrast_rows(eval_dir: Path, dataset: str, a: str, b: str, metrics: tuple[str, ...]) -> pl.DataFrame:
    """One row per metric: both means, the paired difference ``a − b`` and its 95% CI, in points.
    A metric missing from either method's table is a ``ValueError``."""
    per_q = {m: _table(eval_dir, dataset, m) for m in (a, b)}
    rows = paired_contrasts(per_q, dataset, [(f"{a} − {b}", a, b)], metrics)
    missing = sorted(set(metrics) - set(rows["metric"].to_list()))
    if missing:
        raise ValueError(f"{', '.join(missing)} missing from {a} or {b} on {dataset}")
    return rows


def render(rows: pl.DataFrame, a: str, b: str) -> str:
    """Markdown table of :func:`contrast_rows`."""
    return render_plain_markdown(rows.select(
        "metric", "n", pl.col("a_mean").alias(a), pl.col("b_mean").alias(b),
        difference_ci(rows).alias(f"{a} − {b} [95% CI]")))


def group_means(eval_dir: Path, questions: pl.DataFrame | pd.DataFrame, dataset: str, a: str, b: str,
                metrics: tuple[str, ...], by: str) -> pl.DataFrame:
    """Means in points (``round(100 · mean, 2)``) of ``a`` and ``b`` per value of
    ``questions[by]`` (sorted), over the questions both methods were evaluated on (``n`` per
    group); columns ``<metric> a`` and ``<metric> b``."""
    if by not in questions.columns:
        raise ValueError(f"questions of {dataset} have no column {by!r}")
    tables = [_table(eval_dir, dataset, m).select(pl.col("question_id").cast(pl.String),
                                                  *[pl.col(c).alias(f"{c} {m}") for c in metrics])
              for m in (a, b)]
    groups = as_polars(questions).select(pl.col("question_id").cast(pl.String), by)
    joined = tables[0].join(tables[1], on="question_id").join(groups, on="question_id")
    cols = [f"{c} {m}" for c in metrics for m in (a, b)]
    means = joined.group_by(by).agg(pl.len().alias("n"), *[pl.col(c).mean() for c in cols]).sort(by)
    return means.with_columns(pl.col(c).map_elements(lambda v: round(100 * v, 2), return_dtype=pl.Float64)
                              for c in cols)


def report(eval_dir: Path, dataset: str, a: str, b: str, metrics: tuple[str, ...],
           questions: pl.DataFrame | pd.DataFrame | None = None, by: str | None = None) -> str:
    """The contrast table of :func:`contrast_rows`; with ``by`` (and the dataset's
    ``questions``), a blank line and the table of :func:`group_means` after it."""
    text = render(contrast_rows(eval_dir, dataset, a, b, metrics), a, b)
    if by:
        if questions is None:
            raise ValueError("group means need the dataset's questions")
        text += "\n\n" + render_plain_markdown(group_means(eval_dir, questions, dataset, a, b,
                                                           metrics, by))
    return text
