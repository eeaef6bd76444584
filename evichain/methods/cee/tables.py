"""Paper-shaped CEE tables from the metrics files ``reports/metrics/<ds>/<method>.json``.

* Table 1 shape (main results): R@5, MAP@10, nDCG@10, FSR@10 per method.
* Table 2 shape (ablation): R@10, nDCG@10, FSR@10 for the dense baseline, ``ours`` (cee-full)
  and the three "w/o" variants.

FSR@K (Full Support Recall) is the project's ``Chain@K`` = mean 1[G ⊆ R_K]; values are
percentages with two decimals, as in the paper. Usage::

    python -m evichain.methods.cee.tables --dataset demo [--out reports/cee/demo.md]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from evichain.io import read_json, write_text
from evichain.methods.cee.params import VARIANT_LABELS
from evichain.paths import ReportPaths

MAIN_COLUMNS: dict[str, str] = {"R@5": "Recall@5", "MAP@10": "MAP@10", "nDCG@10": "nDCG@10",
                                "FSR@10": "Chain@10"}
ABLATION_COLUMNS: dict[str, str] = {"R@10": "Recall@10", "nDCG@10": "nDCG@10", "FSR@10": "Chain@10"}


def _row(label: str, metrics: dict[str, object] | None, columns: dict[str, str]) -> str:
    if metrics is None:
        return f"| {label} | " + " | ".join("n/a" for _ in columns) + " |"
    cells = [f"{100.0 * float(metrics[key]):.2f}" for key in columns.values()]  # type: ignore[arg-type]
    return f"| {label} | " + " | ".join(cells) + " |"


def _metrics(reports: ReportPaths, dataset: str, method: str) -> dict[str, object] | None:
    path = reports.metrics(dataset, method)
    return read_json(path) if path.exists() else None


def _table(rows: Sequence[tuple[str, dict[str, object] | None]], columns: dict[str, str]) -> str:
    head = "| method | " + " | ".join(columns) + " |"
    rule = "|---|" + "---:|" * len(columns)
    return "\n".join([head, rule, *(_row(label, m, columns) for label, m in rows)])


def main_table(dataset: str, methods: Sequence[str] = ("bm25", "dense", "cee-full"),
               reports: ReportPaths = ReportPaths()) -> str:
    """Table 1 shape: R@5, MAP@10, nDCG@10, FSR@10 (= Chain@10) per method, in percent."""
    return _table([(m, _metrics(reports, dataset, m)) for m in methods], MAIN_COLUMNS)


def ablation_table(dataset: str, variants: Sequence[str] = tuple(VARIANT_LABELS),
                   baseline: str = "dense", reports: ReportPaths = ReportPaths()) -> str:
    """Table 2 shape: R@10, nDCG@10, FSR@10 for the baseline, ours and the w/o variants."""
    rows = [(baseline, _metrics(reports, dataset, baseline))]
    rows += [(VARIANT_LABELS.get(v, v), _metrics(reports, dataset, f"cee-{v}")) for v in variants]
    return _table(rows, ABLATION_COLUMNS)


def tables_markdown(dataset: str, reports: ReportPaths = ReportPaths()) -> str:
    """Both tables with their metric definitions, for ``dataset``."""
    n = _metrics(reports, dataset, "cee-full") or {}
    return "\n".join([
        f"# CEE on {dataset} ({n.get('n_questions', '?')} questions, "
        f"{n.get('question_filter', '?')})", "",
        "R@K = mean |G∩R_K|/|G|; FSR@10 = Chain@10 = mean 1[G ⊆ R_10]; MAP@10 and nDCG@10 with "
        "binary relevance (see evichain/metrics/retrieval.py). Percent.", "",
        "## Main results (Table 1 shape)", "", main_table(dataset, reports=reports), "",
        "## Ablation (Table 2 shape)", "", ablation_table(dataset, reports=reports), ""])


def main(argv: Sequence[str] | None = None) -> None:
    """Print (or write with ``--out``) both tables for one dataset."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    text = tables_markdown(args.dataset)
    if args.out:
        write_text(text, args.out)
    print(text)


if __name__ == "__main__":
    main()
