"""Paired bootstrap difference of two evaluated methods on one dataset.

For each metric, ``mean(a − b)`` in points over the questions both methods were evaluated on
(inner join on ``question_id`` of ``reports/eval/<dataset>/<method>.parquet``), with the 95%
percentile interval of 10,000 paired resamples, computed by the report's own contrast code
(:func:`evichain.report.ablations.paired_contrasts`: seed ``seed_for(dataset, metric)``), so a
contrast printed here and one printed in ``reports/README.md`` agree when they compare the same
cells. Usage:

    .venv/bin/python scripts/compare_methods.py musique evireform-full hipporag2 \
        --metrics Recall@5 Chain@5

``--by type`` (any column of ``artifacts/<dataset>/questions.parquet``) adds both methods' means
per group of questions (no interval: the groups are small).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from evichain.io import read_parquet
from evichain.paths import DatasetPaths
from evichain.report.ablations import paired_contrasts
from evichain.report.tables import ci_text, render_plain_markdown

DEFAULT_METRICS = ("Recall@2", "Recall@5", "Recall@10", "Chain@5", "MAP@10", "nDCG@10")


def contrast_rows(eval_dir: Path, dataset: str, a: str, b: str, metrics: tuple[str, ...]) -> pd.DataFrame:
    """One row per metric: both means, the paired difference ``a − b`` and its 95% CI, in points."""
    per_q = {m: read_parquet(eval_dir / dataset / f"{m}.parquet") for m in (a, b)}
    rows = paired_contrasts(per_q, dataset, [(f"{a} − {b}", a, b)], metrics)
    missing = sorted(set(metrics) - set(rows.get("metric", [])))
    if missing:
        raise SystemExit(f"{', '.join(missing)} missing from {a} or {b} on {dataset}")
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
        raise SystemExit(f"questions of {dataset} have no column {by!r}")
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("a", help="method whose score comes first in a − b")
    parser.add_argument("b")
    parser.add_argument("--metrics", nargs="+", default=list(DEFAULT_METRICS))
    parser.add_argument("--eval-dir", type=Path, default=Path("reports/eval"))
    parser.add_argument("--by", help="also print per-group means by this questions.parquet column")
    args = parser.parse_args()
    metrics = tuple(args.metrics)
    print(render(contrast_rows(args.eval_dir, args.dataset, args.a, args.b, metrics), args.a, args.b))
    if args.by:
        questions = read_parquet(DatasetPaths(args.dataset).questions)
        print()
        print(render_plain_markdown(group_means(args.eval_dir, questions, args.dataset, args.a, args.b,
                                                metrics, args.by)))


if __name__ == "__main__":
    main()
