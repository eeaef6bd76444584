"""Paired bootstrap confidence intervals over questions (EviReform Appendix A.1, DESIGN.md §6).

Procedure, for one dataset and one metric with per-question values ``x_1..x_n``:

1. Draw an index matrix ``I`` of shape ``(B, n)``, ``B = 10,000`` by default, each entry uniform
   on ``{0..n-1}`` with replacement, from ``numpy.random.default_rng(seed)`` (PCG64), where
   ``seed = 202707 + int(sha256(f"{dataset}/{metric}").hexdigest()[:8], 16) mod 2**31``
   (:func:`seed_for`).
2. Resample ``b`` has mean ``m_b = mean(x[I[b]])``, computed row-wise on chunks of ``I`` (a slow
   loop drawing ``rng.integers(0, n, n, dtype=int32)`` per resample from the same generator gets
   the same resamples; its ``np.mean`` can differ only by summation-order rounding, ~1e-16).
3. The 95% interval is the empirical 2.5th and 97.5th percentiles of ``m_1..m_B``
   (``numpy.percentile``, linear interpolation between order statistics); the point estimate is
   the plain mean ``mean(x)``, not the bootstrap mean.

Pairing: every method of a dataset is evaluated on the *same* question set (the inner join on
``question_id`` of the methods that report the metric; questions with a missing value in any of
them are dropped), in sorted id order, and all of them reuse the *same* index matrix ``I``. The
paired difference of methods ``a`` and ``b`` resamples ``d_i = a_i - b_i`` with that ``I``.

Values keep the unit they come in (fractions in [0, 1] from the metric tables).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from evichain.metrics.frames import as_polars

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

BASE_SEED = 202707
N_RESAMPLES = 10_000
CONFIDENCE = 0.95
_CHUNK = 1_000  # resamples gathered at once: bounds memory to CHUNK * n floats


@dataclass(frozen=True)
class Interval:
    """Point estimate and percentile interval."""

    mean: float
    low: float
    high: float


def seed_for(dataset: str, metric: str, base_seed: int = BASE_SEED) -> int:
    """``base_seed + int(sha256(f"{dataset}/{metric}")[:8 hex], 16) mod 2**31``."""
    digest = hashlib.sha256(f"{dataset}/{metric}".encode()).hexdigest()
    return base_seed + int(digest[:8], 16) % 2**31


def resample_indices(n: int, n_resamples: int = N_RESAMPLES, seed: int = BASE_SEED) -> np.ndarray:
    """Index matrix ``(n_resamples, n)`` of int32 draws with replacement from ``range(n)``."""
    if n < 1:
        raise ValueError("cannot bootstrap an empty sample")
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(n_resamples, n), dtype=np.int32)


def resample_means(values: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """``m_b = mean(values[indices[b]])`` for every row ``b``, in chunks of resamples."""
    values = np.asarray(values, dtype=np.float64)
    if indices.ndim != 2 or indices.shape[1] != values.shape[0]:
        raise ValueError(f"index matrix {indices.shape} does not match {values.shape[0]} values")
    out = np.empty(indices.shape[0], dtype=np.float64)
    for start in range(0, indices.shape[0], _CHUNK):
        out[start : start + _CHUNK] = values[indices[start : start + _CHUNK]].mean(axis=1)
    return out


def bootstrap_ci(
    values: np.ndarray,
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int = BASE_SEED,
    indices: np.ndarray | None = None,
    confidence: float = CONFIDENCE,
) -> Interval:
    """``mean(values)`` and the percentile interval of the resampled means.

    ``indices`` (from :func:`resample_indices`) overrides ``n_resamples``/``seed``; pass the same
    matrix for every system of a dataset and metric to keep them paired.
    """
    values = np.asarray(values, dtype=np.float64)
    if indices is None:
        indices = resample_indices(values.shape[0], n_resamples, seed)
    low, high = _percentiles(resample_means(values, indices), confidence)
    return Interval(float(values.mean()), low, high)


def paired_difference_ci(
    a: np.ndarray,
    b: np.ndarray,
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int = BASE_SEED,
    indices: np.ndarray | None = None,
    confidence: float = CONFIDENCE,
) -> Interval:
    """Interval of ``mean(a - b)``; ``a[i]`` and ``b[i]`` must be the same question."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired samples differ in shape: {a.shape} vs {b.shape}")
    return bootstrap_ci(
        a - b, n_resamples=n_resamples, seed=seed, indices=indices, confidence=confidence
    )


def bootstrap_table(
    per_q: Mapping[str, pl.DataFrame | pd.DataFrame],
    metrics: Sequence[str],
    dataset: str,
    reference_method: str,
    *,
    n_resamples: int = N_RESAMPLES,
    base_seed: int = BASE_SEED,
    confidence: float = CONFIDENCE,
) -> pl.DataFrame:
    """Means and CIs of every method and metric, plus reference-vs-best-other differences.

    ``per_q`` maps method name to its per-question table (``question_id`` + metric columns).
    A method lacking a metric column is skipped for that metric. For each metric, one index
    matrix (seed :func:`seed_for` ``(dataset, metric)``) serves all methods and the difference.

    Rows (``kind``): ``"score"`` — one per method, ``mean/ci_low/ci_high`` of the metric;
    ``"difference"`` — one per metric, ``method`` = the reference, ``comparator`` = the other
    method with the highest mean on the common questions (ties: first in ``per_q`` order),
    ``comparator_mean`` its mean, and ``mean/ci_low/ci_high`` of reference minus comparator.
    Columns: :data:`TABLE_SCHEMA`.
    """
    rows: list[dict[str, object]] = []
    for metric in metrics:
        matrix = aligned_values(per_q, metric)
        if matrix.height == 0:
            continue
        seed = seed_for(dataset, metric, base_seed)
        indices = resample_indices(matrix.height, n_resamples, seed)
        base = {"dataset": dataset, "metric": metric, "n_questions": matrix.height, "seed": seed}
        for method in matrix.columns[1:]:
            ci = bootstrap_ci(matrix[method].to_numpy(), indices=indices, confidence=confidence)
            rows.append({**base, "kind": "score", "method": method, **_ci_cols(ci)})
        diff = _difference_row(matrix, reference_method, indices, confidence)
        if diff is not None:
            rows.append({**base, "kind": "difference", **diff})
    return pl.DataFrame(rows, schema=TABLE_SCHEMA)


TABLE_SCHEMA: dict[str, type[pl.DataType]] = {
    "dataset": pl.String, "metric": pl.String, "kind": pl.String, "method": pl.String,
    "comparator": pl.String, "comparator_mean": pl.Float64, "mean": pl.Float64,
    "ci_low": pl.Float64, "ci_high": pl.Float64, "n_questions": pl.Int64, "seed": pl.Int64,
}  # fmt: skip
TABLE_COLUMNS = list(TABLE_SCHEMA)


def aligned_values(per_q: Mapping[str, pl.DataFrame | pd.DataFrame], metric: str) -> pl.DataFrame:
    """``question_id`` then one Float64 column of ``metric`` per method: the inner join on
    question ids (as strings), sorted by id; no row when no method has the column.

    Only methods having the column take part; questions missing (or null/NaN) for any of them
    are dropped (logged), so that every method is scored on the same questions.
    """
    cols = [as_polars(df).select(pl.col("question_id").cast(pl.String),
                                 pl.col(metric).cast(pl.Float64).fill_nan(None).alias(m))
            for m, df in per_q.items() if metric in df.columns]  # fmt: skip
    if not cols:
        return pl.DataFrame(schema={"question_id": pl.String})
    joined = cols[0]
    for col in cols[1:]:
        joined = joined.join(col, on="question_id", how="inner")
    kept = joined.drop_nulls().sort("question_id")
    dropped = max(c.height for c in cols) - kept.height
    if dropped:
        log.info("%s: %d question(s) not shared by all methods were dropped", metric, dropped)
    return kept


def column_mean(matrix: pl.DataFrame, method: str) -> float:
    """Plain mean of one method's column of :func:`aligned_values` (numpy's pairwise sum)."""
    return float(np.mean(matrix[method].to_numpy()))


def _difference_row(
    matrix: pl.DataFrame, reference: str, indices: np.ndarray, confidence: float
) -> dict[str, object] | None:
    """Reference minus the best other method (highest mean), or None if either is absent."""
    others = [m for m in matrix.columns[1:] if m != reference]
    if reference not in matrix.columns or not others:
        return None
    means = {m: column_mean(matrix, m) for m in others}
    best = max(others, key=means.__getitem__)  # first of the tied maxima
    ref, other = matrix[reference].to_numpy(), matrix[best].to_numpy()
    ci = paired_difference_ci(ref, other, indices=indices, confidence=confidence)
    return {"method": reference, "comparator": best, "comparator_mean": means[best],
            **_ci_cols(ci)}  # fmt: skip


def _ci_cols(ci: Interval) -> dict[str, float]:
    return {"mean": ci.mean, "ci_low": ci.low, "ci_high": ci.high}


def _percentiles(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    """Empirical ``(1-c)/2`` and ``(1+c)/2`` percentiles (linear interpolation)."""
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(samples, [tail, 100 - tail], method="linear")
    return float(low), float(high)
