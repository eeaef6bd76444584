"""Run tables: ``question_id, rank, passage_id, score`` (rank 1-based, top-k per question).

Ties are broken by the stored passage order (the corpus row order), as EviReform C.1
prescribes, so a run is a deterministic function of the scores.

:func:`run_rows` is the run in polars (:data:`RUN_SCHEMA`), the type the methods and their
flow give; :func:`run_from_scores` returns it. :func:`run_table` is the same table in pandas,
still returned by the fusion and first-stage searches for their callers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import polars as pl

RUN_COLUMNS = ["question_id", "rank", "passage_id", "score"]
RUN_SCHEMA = pl.Schema({"question_id": pl.String, "rank": pl.Int32, "passage_id": pl.String,
                        "score": pl.Float64})
"""The dtypes of a run table in polars (those of :func:`run_table` once written)."""


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores of a 1-D array; ties by lower index first."""
    k = min(k, scores.shape[0])
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    part = np.argpartition(-scores, k - 1)[:k] if k < scores.shape[0] else np.arange(scores.shape[0])
    kth = scores[part].min()
    cand = np.flatnonzero(scores >= kth)  # every index that could tie at the boundary
    order = np.lexsort((cand, -scores[cand]))
    return cand[order][:k]


Row = tuple[str, int, str, float]
"""One run row: ``(question_id, rank, passage_id, score)``."""


def top_k_rows(
    question_ids: Sequence[str], scores: np.ndarray, passage_ids: Sequence[str], k: int,
    *, positive_only: bool = False,
) -> list[Row]:
    """The run rows of a (questions × passages) score matrix: per question, in question order,
    the :func:`top_k_indices` of its score row with rank 1, 2, … and the score as a float.

    With ``positive_only`` a passage needs a score > 0 to be retrieved (BM25: at least one
    query term matched), so a question can have fewer than ``k`` rows.
    """
    pids = np.asarray(passage_ids, dtype=object)
    rows: list[Row] = []
    for qi, qid in enumerate(question_ids):
        idx = top_k_indices(scores[qi], k)
        if positive_only:
            idx = idx[scores[qi, idx] > 0]
        rows.extend((qid, r + 1, pids[j], float(scores[qi, j])) for r, j in enumerate(idx))
    return rows


def run_from_scores(
    question_ids: Sequence[str], scores: np.ndarray, passage_ids: Sequence[str], k: int,
    *, positive_only: bool = False,
) -> pl.DataFrame:
    """The polars run (:func:`run_rows`) of :func:`top_k_rows` (same arguments)."""
    return run_rows(top_k_rows(question_ids, scores, passage_ids, k, positive_only=positive_only))


def run_table(rows: list[Row] | list[list[object]]) -> pd.DataFrame:
    """A run table from ``(question_id, rank, passage_id, score)`` rows, with its dtypes."""
    return pd.DataFrame(rows, columns=RUN_COLUMNS).astype({"rank": "int32", "score": "float64"})


def run_rows(rows: Sequence[Row]) -> pl.DataFrame:
    """A polars run table (:data:`RUN_SCHEMA`) from ``(question_id, rank, passage_id, score)``
    rows, in their order."""
    return pl.DataFrame(list(rows), schema=RUN_SCHEMA, orient="row", strict=False)


def passage_texts(corpus: pl.DataFrame) -> dict[str, tuple[str, str]]:
    """passage_id → ``(title, text)`` of every corpus row, built once (passage ids are unique:
    :func:`evichain.data.schema.validate_corpus`)."""
    return {str(p): (str(t), str(x)) for p, t, x in
            zip(corpus["passage_id"].to_list(), corpus["title"].to_list(), corpus["text"].to_list())}


def format_passages(corpus: pl.DataFrame | pd.DataFrame, template: str) -> list[str]:
    """Passage texts for indexing, e.g. ``"{title}\\n{text}"``: ``template`` filled with each
    row's ``title`` and ``text``, in row order."""
    return [template.format(title=t, text=x) for t, x in zip(corpus["title"], corpus["text"])]
