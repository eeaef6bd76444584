"""Assembling GraphRAG-Bench Medical judgements into per-question rows and the metrics JSON.

* A question whose answer call failed is not judged: ``status="answer_failed"`` and its
  type's metrics are 0 (there is no answer to credit), counted per type.
* A judged question gets semantic similarity from one batch of embeddings, then
  correctness = ``(w1·F_β + w2·sim)/(w1+w2)`` (:mod:`evichain.qa.medical_metrics`).
* Metrics a type does not report are NaN in its rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import polars as pl

from evichain.metrics.frames import columns_as_polars
from evichain.qa.medical_metrics import (
    METRIC_COLUMNS, METRICS_BY_TYPE, answer_correctness, count_where, mean_accuracy, metrics_for,
    scaled_similarity, type_summary,
)

PER_QUESTION_COLUMNS = [
    "question_id", "type", "status", "error_kind", "error", "idk", *METRIC_COLUMNS,
    "statement_f", "similarity", "tp", "fp", "fn", "answer_statements", "reference_statements",
    "facts", "facts_covered", "faithful_statements", "judge_calls", "judge_failed_calls",
    "parse_repairs", "repair_notes", "judge_prompt_tokens", "judge_completion_tokens",
    "reader_prompt_tokens", "reader_completion_tokens",
]


def answer_failed_row(question_type: str, error_kind: str, error: str) -> dict[str, Any]:
    """The row of a question whose answer call failed: its type's metrics are 0."""
    wanted = metrics_for(question_type)
    return {"status": "answer_failed", "error_kind": error_kind, "error": error, "idk": False,
            **{m: (0.0 if m in wanted else math.nan) for m in METRIC_COLUMNS},
            "statement_f": math.nan, "similarity": math.nan, "answer_statements": [],
            "reference_statements": [], "facts": [], "judge_calls": 0, "judge_failed_calls": 0,
            "parse_repairs": 0, "repair_notes": "", "judge_prompt_tokens": 0,
            "judge_completion_tokens": 0}


def with_correctness(rows: pd.DataFrame, predictions: Sequence[str], references: Sequence[str],
                     encode: Callable[[list[str]], np.ndarray],
                     weights: tuple[float, float]) -> pd.DataFrame:
    """Judged rows (aligned with ``predictions`` / ``references``) with ``similarity`` and
    ``correctness`` filled in; a NaN statement F-beta (failed judge call) keeps NaN.

    ``encode`` is the pipeline's encoder (``embed.model``, MiniLM by default, which reads the
    first 256 word pieces of a text); the benchmark used BGE-large-en-v1.5, not available
    offline here."""
    out = rows.copy()
    if out.empty:
        return out
    vecs = encode([*predictions, *references])
    n = len(predictions)
    sims = [scaled_similarity(vecs[i], vecs[n + i]) for i in range(n)]
    out["similarity"] = sims
    out["correctness"] = [answer_correctness(f, s, weights) if not _nan(f) else math.nan
                          for f, s in zip(out["statement_f"], sims, strict=True)]
    return out


def _nan(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def finalize(per_q: pd.DataFrame) -> pd.DataFrame:
    """Columns in :data:`PER_QUESTION_COLUMNS` order, sorted by question id."""
    for col in PER_QUESTION_COLUMNS:
        if col not in per_q:
            per_q[col] = None
    return per_q[PER_QUESTION_COLUMNS].sort_values("question_id", kind="stable").reset_index(drop=True)


TOKEN_COLUMNS: tuple[str, ...] = ("judge_prompt_tokens", "judge_completion_tokens",
                                  "reader_prompt_tokens", "reader_completion_tokens")


def summarize(per_q: pl.DataFrame | pd.DataFrame, *, dataset: str, method: str, judge_model: str,
              reader_model: str, similarity_model: str,
              weights: tuple[float, float]) -> dict[str, Any]:
    """The metrics JSON: per-type metrics and counts (:func:`type_summary`), ACC, models, tokens
    (response tokens, identical on a cache hit, so an unchanged re-run writes the same file).

    ``<side>_tokens_per_question = round((prompt + completion) / max(1, questions), 2)`` with
    column totals (nulls as 0); ``idk_answers`` counts true ``idk`` (null as false);
    ``parse_repairs`` is the column total. A pandas table (what stages/evaluate_medical passes)
    is converted once, on the columns used.
    """
    table = columns_as_polars(per_q, ["type", "status", "idk", "parse_repairs", *METRIC_COLUMNS,
                                      *TOKEN_COLUMNS])
    per_type = type_summary(table)
    n = max(1, table.height)
    judge_pt, judge_ct = column_total(table, "judge_prompt_tokens"), column_total(table, "judge_completion_tokens")
    read_pt, read_ct = column_total(table, "reader_prompt_tokens"), column_total(table, "reader_completion_tokens")
    return {
        "dataset": dataset, "method": method, "benchmark": "GraphRAG-Bench Medical",
        "judge_model": judge_model, "reader_model": reader_model,
        "similarity_model": similarity_model, "correctness_weights": list(weights),
        "metrics_by_type": {t: list(m) for t, m in METRICS_BY_TYPE.items()},
        "questions": table.height,
        "answer_failed": count_where(table, pl.col("status") == "answer_failed"),
        "judge_failed": count_where(table, pl.col("status") == "judge_failed"),
        "idk_answers": count_where(table, pl.col("idk").cast(pl.Boolean)),
        "parse_repairs": column_total(table, "parse_repairs"),
        "per_type": per_type, "ACC": mean_accuracy(per_type),
        "judge_tokens": {"prompt": judge_pt, "completion": judge_ct},
        "judge_tokens_per_question": round((judge_pt + judge_ct) / n, 2),
        "reader_tokens": {"prompt": read_pt, "completion": read_ct},
        "reader_tokens_per_question": round((read_pt + read_ct) / n, 2),
    }


def column_total(table: pl.DataFrame, column: str) -> int:
    """``int(Σ column)``, null and NaN counted as 0."""
    values = table[column]
    if values.dtype.is_float():
        values = values.fill_nan(None)
    return int(values.sum())


def flat_metrics(summary: Mapping[str, Any]) -> dict[str, float | None]:
    """``"<type> <metric>"`` → value, plus ``ACC`` (for tables)."""
    out: dict[str, float | None] = {}
    for qtype, metrics in METRICS_BY_TYPE.items():
        for m in metrics:
            out[f"{qtype} {m}"] = summary.get("per_type", {}).get(qtype, {}).get(m)
    out["ACC"] = summary.get("ACC")
    return out
