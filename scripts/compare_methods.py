"""Paired bootstrap difference of two evaluated methods on one dataset.

For each metric, ``mean(a − b)`` in points over the questions both methods were evaluated on
(inner join on ``question_id`` of ``artifacts/eval/<dataset>/<method>.parquet``), with the 95%
percentile interval of 10,000 paired resamples. The index matrix is drawn exactly as the report's
ablation contrasts draw it (:func:`evichain.metrics.bootstrap.resample_indices` with seed
:func:`~evichain.metrics.bootstrap.seed_for` ``(dataset, metric)``), so a contrast printed here
and one printed in ``reports/README.md`` agree when they compare the same cells. Usage:

    .venv/bin/python scripts/compare_methods.py musique evireform-full hipporag2 \
        --metrics Recall@5 Chain@5
"""

from __future__ import annotations

import argparse
from pathlib import Path

from evichain.io import read_parquet
from evichain.metrics.bootstrap import aligned_values, paired_difference_ci, resample_indices, seed_for

DEFAULT_METRICS = ("Recall@2", "Recall@5", "Recall@10", "Chain@5", "MAP@10", "nDCG@10")


def contrast_rows(eval_dir: Path, dataset: str, a: str, b: str, metrics: tuple[str, ...]) -> list[dict[str, object]]:
    """One row per metric: both means, the paired difference ``a − b`` and its 95% CI, in points."""
    per_q = {m: read_parquet(eval_dir / dataset / f"{m}.parquet") for m in (a, b)}
    rows: list[dict[str, object]] = []
    for metric in metrics:
        matrix = aligned_values(per_q, metric)
        if a not in matrix.columns or b not in matrix.columns:
            raise SystemExit(f"{metric!r} is missing from {a} or {b} on {dataset}")
        indices = resample_indices(len(matrix), seed=seed_for(dataset, metric))
        ci = paired_difference_ci(matrix[a].to_numpy(), matrix[b].to_numpy(), indices=indices)
        rows.append({"metric": metric, "n": len(matrix), a: 100 * matrix[a].mean(), b: 100 * matrix[b].mean(),
                     "a − b": 100 * ci.mean, "low": 100 * ci.low, "high": 100 * ci.high})
    return rows


def render(rows: list[dict[str, object]], a: str, b: str) -> str:
    """Markdown table of :func:`contrast_rows`."""
    lines = [f"| metric | n | {a} | {b} | {a} − {b} [95% CI] |", "|---|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['metric']} | {r['n']} | {r[a]:.2f} | {r[b]:.2f} | "
                     f"{r['a − b']:+.2f} [{r['low']:+.2f}, {r['high']:+.2f}] |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("a", help="method whose score comes first in a − b")
    parser.add_argument("b")
    parser.add_argument("--metrics", nargs="+", default=list(DEFAULT_METRICS))
    parser.add_argument("--eval-dir", type=Path, default=Path("artifacts/eval"))
    args = parser.parse_args()
    print(render(contrast_rows(args.eval_dir, args.dataset, args.a, args.b, tuple(args.metrics)), args.a, args.b))


if __name__ == "__main__":
    main()
