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

import pandas as pd

from evichain.io import read_parquet
from evichain.report.ablations import paired_contrasts
from evichain.report.tables import ci_text, render_plain_markdown

DEFAULT_METRICS = ("Recall@2", "Recall@5", "Recall@10", "Chain@5", "MAP@10", "nDCG@10")


def contrast_rows(eval_dir: Path, dataset: str, a: str, b: str, metrics: tuple[str, ...]) -> pd.DataFrame:
    """One row per metric: both means, the paired difference ``a − b`` and its 95% CI, in points.
    A metric missing from either method's table is a ``ValueError``."""
    per_q = {m: read_parquet(eval_dir / dataset / f"{m}.parquet") for m in (a, b)}
    rows = paired_contrasts(per_q, dataset, [(f"{a} − {b}", a, b)], metrics)
    missing = sorted(set(metrics) - set(rows.get("metric", [])))
    if missing:
        raise ValueError(f"{', '.join(missing)} missing from {a} or {b} on {dataset}")
    return rows


def render(rows: pd.DataFrame, a: str, b: str) -> str:
    """Markdown table of :func:`contrast_rows`."""
    shown = pd.DataFrame({"metric": rows["metric"], "n": rows["n"], a: rows["a_mean"], b: rows["b_mean"],
                          f"{a} − {b} [95% CI]": [ci_text(d, lo, hi, signed=True) for d, lo, hi in
                                                  zip(rows["difference"], rows["ci_low"], rows["ci_high"])]})
    return render_plain_markdown(shown)


def group_means(eval_dir: Path, questions: pd.DataFrame, dataset: str, a: str, b: str,
                metrics: tuple[str, ...], by: str) -> pd.DataFrame:
    """Means in points of ``a`` and ``b`` per value of ``questions[by]``, over the questions both
    methods were evaluated on (``n`` per group); columns ``<metric> a`` and ``<metric> b``."""
    if by not in questions:
        raise ValueError(f"questions of {dataset} have no column {by!r}")
    per_q = {m: read_parquet(eval_dir / dataset / f"{m}.parquet").set_index("question_id") for m in (a, b)}
    shared = per_q[a].index.intersection(per_q[b].index)
    groups = questions.set_index("question_id").loc[shared, by]
    sizes = groups.groupby(groups).size()
    out = pd.DataFrame({by: sizes.index, "n": sizes.values})
    for metric in metrics:
        for m in (a, b):
            means = per_q[m].loc[shared, metric].groupby(groups).mean()
            out[f"{metric} {m}"] = [round(100 * means[g], 2) for g in out[by]]
    return out


def report(eval_dir: Path, dataset: str, a: str, b: str, metrics: tuple[str, ...],
           questions: pd.DataFrame | None = None, by: str | None = None) -> str:
    """The contrast table of :func:`contrast_rows`; with ``by`` (and the dataset's
    ``questions``), a blank line and the table of :func:`group_means` after it."""
    text = render(contrast_rows(eval_dir, dataset, a, b, metrics), a, b)
    if by:
        if questions is None:
            raise ValueError("group means need the dataset's questions")
        text += "\n\n" + render_plain_markdown(group_means(eval_dir, questions, dataset, a, b,
                                                           metrics, by))
    return text
