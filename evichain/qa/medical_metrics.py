"""GraphRAG-Bench Medical answer metrics (the benchmark's generation evaluator) and ACC.

Which metric each question type reports (GraphRAG-Bench ``generation_eval``; EviReform
Table B.3's nine columns):

===================== ==========================================
Fact Retrieval        correctness, ROUGE-L
Complex Reasoning     correctness, ROUGE-L
Contextual Summarize  correctness, coverage
Creative Generation   correctness, coverage, faithfulness
===================== ==========================================

* **ROUGE-L** (computed): LCS F-measure of answer against reference, ``rouge-score``'s
  ``RougeScorer(["rougeL"], use_stemmer=True)`` convention: lower-case, non-alphanumerics to
  spaces, Porter stemming of tokens longer than 3 characters; 0 if either text is empty.
* **correctness** (LLM judge + embeddings): ``(w1·F_β + w2·sim) / (w1 + w2)`` with
  ``(w1, w2) = (0.75, 0.25)``; ``F_β`` over the statement classification (TP = answer
  statements supported by the reference, FP = answer statements not supported, FN = reference
  statements absent from the answer); ``sim = (cos(e_answer, e_reference) + 1) / 2``.
* **coverage** (LLM judge): the fraction of the reference's facts that the answer covers.
* **faithfulness** (LLM judge): the fraction of the answer's statements supported by the
  retrieved context.
* **ACC** (EviReform C.4): the unweighted mean over the four types of mean correctness.

Means per type are over the questions whose metric could be computed (a failed judge call
leaves NaN, as the benchmark's ``nanmean``); questions whose answer call failed score 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from evichain.metrics.frames import columns_as_polars, mean

if TYPE_CHECKING:
    import pandas as pd

QUESTION_TYPES: tuple[str, ...] = ("Fact Retrieval", "Complex Reasoning", "Contextual Summarize",
                                   "Creative Generation")
METRICS_BY_TYPE: dict[str, tuple[str, ...]] = {
    "Fact Retrieval": ("correctness", "rouge_l"),
    "Complex Reasoning": ("correctness", "rouge_l"),
    "Contextual Summarize": ("correctness", "coverage"),
    "Creative Generation": ("correctness", "coverage", "faithfulness"),
}
METRIC_COLUMNS: tuple[str, ...] = ("correctness", "rouge_l", "coverage", "faithfulness")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def metrics_for(question_type: str) -> tuple[str, ...]:
    """The metrics of a question type; an unknown type is an error naming the known ones."""
    if question_type not in METRICS_BY_TYPE:
        raise ValueError(f"unknown GraphRAG-Bench question type {question_type!r}; "
                         f"known: {list(METRICS_BY_TYPE)}")
    return METRICS_BY_TYPE[question_type]


# ---------------------------------------------------------------------- ROUGE-L
@lru_cache(maxsize=1)
def _porter() -> Any:
    import Stemmer  # PyStemmer (a project dependency): the original Porter algorithm

    return Stemmer.Stemmer("porter")


def rouge_tokens(text: str) -> list[str]:
    """rouge-score's tokenizer: lower-case, ``[^a-z0-9]+`` → space, split, and Porter-stem
    each token longer than 3 characters."""
    words = _NON_ALNUM.sub(" ", text.lower()).split()
    stem = _porter().stemWord
    return [stem(w) if len(w) > 3 else w for w in words]


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token lists (O(|a|·|b|) DP, two rows)."""
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, start=1):
            cur[j] = prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1])
        prev = cur
    return prev[-1]


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F-measure: ``P = LCS/|pred|``, ``R = LCS/|ref|``, ``F = 2PR/(P+R)``; 0 when either
    text is blank or has no tokens (the benchmark's convention)."""
    if not prediction.strip() or not reference.strip():
        return 0.0
    pred, ref = rouge_tokens(prediction), rouge_tokens(reference)
    lcs = lcs_length(pred, ref)
    if lcs == 0:
        return 0.0
    p, r = lcs / len(pred), lcs / len(ref)
    return 2 * p * r / (p + r)


# ---------------------------------------------------------------------- correctness parts
def fbeta(tp: int, fp: int, fn: int, beta: float = 1.0) -> float:
    """F-beta of the statement classification: ``P = TP/(TP+FP)``, ``R = TP/(TP+FN)``,
    ``F = (1+β²)PR/(β²P + R)``; 0 when TP = 0; 1 when there is nothing to classify."""
    if tp + fp + fn == 0:
        return 1.0
    if tp == 0:
        return 0.0
    p, r = tp / (tp + fp), tp / (tp + fn)
    return (1 + beta**2) * p * r / (beta**2 * p + r)


def scaled_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """The benchmark's semantic similarity ``(cos(a, b) + 1) / 2`` in [0, 1]."""
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 0.5
    cos = float(np.dot(a, b)) / (na * nb)
    return (max(-1.0, min(1.0, cos)) + 1.0) / 2.0


def answer_correctness(statement_f: float, similarity: float,
                       weights: tuple[float, float] = (0.75, 0.25)) -> float:
    """``(w1·F_β + w2·sim) / (w1 + w2)`` (numpy ``average`` with weights); NaN stays NaN."""
    w1, w2 = weights
    return (w1 * statement_f + w2 * similarity) / (w1 + w2)


def fraction_true(verdicts: Iterable[bool]) -> float:
    """Share of true verdicts (coverage, faithfulness); NaN for an empty list."""
    values = list(verdicts)
    return sum(values) / len(values) if values else math.nan


# ---------------------------------------------------------------------- aggregation
def type_summary(per_q: pl.DataFrame | pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per question type: n (questions), counts by status, and the mean of each of its metrics
    over the questions where the metric is defined.

    ``n_idk`` counts true ``idk`` (null as false); a metric value is defined when it reads as a
    number (others, null and NaN excluded, as ``pd.to_numeric(errors="coerce").dropna()``);
    ``<metric> = round(sum / n_<metric>, 6)``, summed by numpy, or None when none is defined.
    pandas tables (what stages/evaluate_medical passes) are converted once, on the columns used.
    """
    table = columns_as_polars(per_q, ["type", "status", "idk", *METRIC_COLUMNS])
    out: dict[str, dict[str, Any]] = {}
    for qtype in QUESTION_TYPES:
        rows = table.filter(pl.col("type") == qtype)
        entry: dict[str, Any] = {
            "n": rows.height,
            "n_answer_failed": count_where(rows, pl.col("status") == "answer_failed"),
            "n_judge_failed": count_where(rows, pl.col("status") == "judge_failed"),
            "n_idk": count_where(rows, pl.col("idk").cast(pl.Boolean)) if "idk" in rows.columns else 0,
        }
        for metric in METRICS_BY_TYPE[qtype]:
            values = defined_values(rows[metric])
            entry[metric] = round(mean(values), 6) if values.len() else None
            entry[f"n_{metric}"] = values.len()
        out[qtype] = entry
    return out


def defined_values(column: pl.Series) -> pl.Series:
    """The values of ``column`` that read as numbers, as Float64 (null, NaN and non-numbers
    dropped)."""
    values = column.cast(pl.Float64, strict=False) if column.dtype != pl.Object else pl.Series(
        [_number(v) for v in column.to_list()], dtype=pl.Float64)
    return values.drop_nulls().drop_nans()


def _number(value: object) -> float | None:
    """``value`` as a float, or None when it is not a number (``pd.to_numeric`` coercion)."""
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def count_where(rows: pl.DataFrame, condition: pl.Expr) -> int:
    """Rows where ``condition`` holds (null counts as false)."""
    return int(rows.select(condition.fill_null(False).sum()).item())


def mean_accuracy(per_type: Mapping[str, Mapping[str, Any]]) -> float | None:
    """ACC = unweighted mean of the four types' mean correctness; None unless all four have one."""
    values = [per_type.get(t, {}).get("correctness") for t in QUESTION_TYPES]
    if any(v is None for v in values):
        return None
    return round(float(np.mean(values)), 6)
