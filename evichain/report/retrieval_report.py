"""The retrieval report (``reports/retrieval.md``): one methods × metrics table per dataset,
each preceded by its setup (embedder, question count and filter), plus Recall@K plot data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from evichain.report.main_report import NO_RANKING
from evichain.report.tables import definitions_markdown, labelled_frame, render_markdown

TABLE_METRICS = ("Recall@1", "Recall@2", "Recall@5", "Recall@10", "Recall@20", "Chain@5",
                 "Hit@5", "MAP@10", "nDCG@10")


def metrics_frame(metrics: Mapping[str, Mapping[str, Any]], columns: Sequence[str]) -> pl.DataFrame:
    """A ``method`` column, then ``columns``, from ``{method: metrics JSON}`` (missing metric →
    "N/E"; :func:`~evichain.report.tables.labelled_frame`)."""
    rows = {m: {c: values.get(c, "N/E") for c in columns} for m, values in metrics.items()}
    return labelled_frame(rows, columns=columns)


def recall_curve_rows(dataset: str, metrics: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Long rows (dataset, method, k, recall) for the DVC plot of Recall@K against K."""
    rows = []
    for method, values in metrics.items():
        for key, value in values.items():
            if key.startswith("Recall@"):
                rows.append({"dataset": dataset, "method": method, "k": int(key.split("@")[1]),
                             "recall": round(float(value), 6)})
    return sorted(rows, key=lambda r: (r["dataset"], r["method"], r["k"]))


def dataset_section(dataset: str, metrics: Mapping[str, Mapping[str, Any]], setup: str,
                    figure: str | None, notes: Sequence[str] = ()) -> str:
    """Markdown section for one dataset (or a note when retrieval metrics are undefined);
    ``figure``: its Recall@K figure (path relative to ``reports/``), ``notes``: sentences after
    the table (what GeAR's recall counts; why no figure is drawn)."""
    lines = [f"## {dataset}", "", setup, ""]
    scored = {m: v for m, v in metrics.items() if v.get("n_questions", 0)}
    if not metrics:
        lines += ["Not evaluated yet (N/E): run `dvc repro` for this dataset.", ""]
        return "\n".join(lines)
    if not scored:
        lines += ["Retrieval metrics: N/A (this dataset has no gold passages; see the QA report).", ""]
        return "\n".join(lines)
    n = sorted({int(v["n_questions"]) for v in scored.values()})
    filt = sorted({str(v.get("question_filter", "all")) for v in scored.values()})
    lines += [f"Questions evaluated: {', '.join(map(str, n))} (filter: {', '.join(filt)}).", ""]
    lines.append(render_markdown(metrics_frame(scored, TABLE_METRICS)))
    if unranked := sorted(set(scored) & NO_RANKING):
        lines += ["", f"{', '.join(unranked)}: iterative methods return evidence, not a ranking; "
                  "their rows score the passages in the order of first retrieval, and the main "
                  "report prints N/A for their recall (EviReform §C.1)."]
    lines += [line for note in notes for line in ("", note)]
    if figure:
        lines += ["", f"![Recall@K on {dataset}]({figure})"]
    lines.append("")
    return "\n".join(lines)


def build_retrieval_report(sections: Sequence[str], header: str) -> str:
    """The whole report: header, per-dataset sections, metric definitions."""
    return "\n".join([header, "", *sections, "## Metric definitions", "",
                      definitions_markdown(["Recall@K", "Chain@K", "Hit@K", "MAP@10", "nDCG@10"])])
