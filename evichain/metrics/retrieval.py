"""Per-question passage-retrieval metrics (DESIGN.md §6; EviReform §4.2, eqs. 16-18).

Notation: for question ``q``, ``G`` is the set of gold passage ids (duplicates collapsed) and
``R_K`` the set of the first ``K`` passages of the method's ranking, in the method's own ``rank``
order. ``K`` is positional: when a run has fewer than ``K`` rows, ``R_K`` is the whole run.

==============  ==============================================  =====================
column          per-question value                              computed by
==============  ==============================================  =====================
``Recall@K``    ``|G ∩ R_K| / |G|``                             ir-measures ``R@K``
``Chain@K``     ``1[G ⊆ R_K]`` (= the CIKM paper's FSR@K)       this module
``Hit@K``       ``1[G ∩ R_K ≠ ∅]``                              ir-measures ``Success@K``
``MAP@10``      ``(1/|G|) Σ_{i ≤ 10, d_i ∈ G} P@i``             ir-measures ``AP@10``
``nDCG@10``     ``DCG@10 / IDCG@10``, binary gains              ir-measures ``nDCG@10``
==============  ==============================================  =====================

Conventions, checked against trec_eval (through pytrec_eval, which ir-measures calls here):

* ``AP@10`` is trec_eval's ``map_cut_10``: the sum of precision at each relevant passage ranked
  in the top 10, divided by the total number of relevant passages ``|G|``, *not* by
  ``min(|G|, 10)``. The two differ only when ``|G| > 10``; the column is called ``MAP@10``
  because its mean over questions is the reported MAP@10.
* ``nDCG@10`` is trec_eval's ``ndcg_cut_10``: ``DCG@10 = Σ_{i ≤ 10} rel_i / log2(i + 1)`` with
  ``rel_i ∈ {0, 1}``; ``IDCG@10`` is the DCG of the ideal ranking, i.e. ``Σ_{i ≤ min(|G|, 10)}
  1 / log2(i + 1)``.
* trec_eval re-sorts a run by score (ties broken by descending document id), so the evaluator
  is given ``score = -rank``: the method's own rank order is evaluated and ties in the method's
  ``score`` column can never reorder it.
* A question in the questions table with no retrieved passage scores 0 on every metric (it is
  kept, not dropped). A question with an empty gold set has no defined recall and is excluded;
  the excluded ids are returned beside the table (:func:`per_question_frame`), stored in the
  pandas ``DataFrame.attrs["excluded_empty_gold"]`` by :func:`per_question_metrics`, and counted
  by :func:`aggregate`. Run rows for questions absent from the questions table are ignored.
* A run must not repeat a passage or a rank within one question (``ValueError`` otherwise):
  trec_eval would silently keep one copy and shift the cut-offs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import ir_measures
import numpy as np
import polars as pl
from ir_measures import AP, R, Success, nDCG

from evichain.metrics.frames import as_polars, mean

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

DEFAULT_KS: tuple[int, ...] = (1, 2, 5, 10, 20)
EXCLUDED_ATTR = "excluded_empty_gold"


def per_question_metrics(
    run: pl.DataFrame | pd.DataFrame,
    questions: pl.DataFrame | pd.DataFrame,
    ks: Sequence[int] = DEFAULT_KS,
) -> pd.DataFrame:
    """:func:`per_question_frame` as pandas, the excluded ids in ``attrs["excluded_empty_gold"]``.

    pandas here only for the callers outside the metrics code not yet migrated (flows/user,
    flows/evireform, the tuning loops of evichain/retrieval/fusion_tuning and
    evichain/methods/cee/tuning), which read the table and its ``attrs``."""
    table, excluded = per_question_frame(run, questions, ks)
    out = table.to_pandas()
    out.attrs[EXCLUDED_ATTR] = excluded
    return out


def per_question_frame(
    run: pl.DataFrame | pd.DataFrame,
    questions: pl.DataFrame | pd.DataFrame,
    ks: Sequence[int] = DEFAULT_KS,
) -> tuple[pl.DataFrame, list[str]]:
    """One row per evaluable question: ``question_id`` and every metric of the module docstring,
    and the sorted ids of the questions excluded for an empty gold set.

    Columns, in order: ``question_id``, ``Recall@K`` for each ``K`` in ``ks``, then ``Chain@K``,
    ``Hit@K``, ``MAP@10`` and ``nDCG@10`` (Float64); rows sorted by ``question_id``; a question
    absent from the run scores 0.0 everywhere.
    """
    ks = _check_ks(ks)
    gold, excluded = gold_table(questions)
    if excluded:
        log.info("excluded %d question(s) with no gold passage", len(excluded))
    qids = gold.select("question_id").unique().sort("question_id")
    ordered = ordered_run(run, qids["question_id"].to_list())
    families = [
        recall_at_k(ordered, gold, ks),
        chain_at_k(ordered, gold, ks),
        hit_at_k(ordered, gold, ks),
        map_at_10(ordered, gold),
        ndcg_at_10(ordered, gold),
    ]
    table = qids
    for family in families:
        table = table.join(family, on="question_id", how="left")
    metrics = [c for c in table.columns if c != "question_id"]
    return table.with_columns(pl.col(metrics).cast(pl.Float64).fill_null(0.0)), excluded


def aggregate(
    per_q: pl.DataFrame | pd.DataFrame, excluded: Mapping[str, Sequence[str]] | None = None
) -> dict[str, float]:
    """Mean of every numeric metric column over questions, plus counts.

    Keys: each numeric column but ``question_id`` (``mean_q value_q``, nulls/NaN skipped; 0.0 for
    an empty table), ``n_questions`` (rows averaged), ``n_<key>`` for every ``excluded_*`` list
    (``excluded``, or a pandas table's ``attrs``: ``n_excluded_empty_gold`` from
    :func:`per_question_frame` / :func:`per_question_metrics`, ``n_excluded_no_answer`` from
    :func:`evichain.metrics.qa.qa_frame`) and, when a
    ``status`` column is present (QA tables), ``n_failed`` = rows whose status is not ``"ok"``.
    ``attrs`` do not survive :func:`evichain.io.write_parquet`: aggregate the in-memory table.
    """
    lists = dict(excluded if excluded is not None else getattr(per_q, "attrs", {}))
    table = as_polars(per_q)
    numeric = [c for c, t in table.schema.items() if c != "question_id" and t.is_numeric()]
    out: dict[str, float] = {c: mean(table[c]) if table.height else 0.0 for c in numeric}
    out["n_questions"] = int(table.height)
    for key, ids in sorted(lists.items()):
        if key.startswith("excluded_"):
            out[f"n_{key}"] = int(len(ids))
    if "status" in table.columns:
        out["n_failed"] = int(table.select((pl.col("status") != "ok").fill_null(True).sum()).item())
    return out


# --- inputs -------------------------------------------------------------------------------------


def gold_table(questions: pl.DataFrame | pd.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """Explode ``gold_passage_ids`` into unique ``(question_id, passage_id)`` pairs (strings).

    Returns the pairs (sorted) and the sorted ids of questions whose gold set is empty. A cell
    may be a list (Parquet), a bare string (one id) or null (no gold).
    """
    table = as_polars(questions)
    q = table.select(pl.col("question_id").cast(pl.String),
                     _as_list_expr(table, "gold_passage_ids").alias("passage_id"))
    gold = (q.explode("passage_id").drop_nulls("passage_id")
            .with_columns(pl.col("passage_id").cast(pl.String))
            .unique().sort(["question_id", "passage_id"]))  # fmt: skip
    excluded = sorted(set(q["question_id"].to_list()) - set(gold["question_id"].to_list()))
    return gold, excluded


def ordered_run(run: pl.DataFrame | pd.DataFrame, question_ids: Iterable[str]) -> pl.DataFrame:
    """Run rows of ``question_ids`` sorted by rank, with a 1-based ``position`` per question.

    ``position`` (not the raw ``rank`` value) defines ``R_K``; ranks need not start at 1 or be
    contiguous, but must be unique per question, and so must passage ids.
    """
    df = as_polars(run).select(
        pl.col("question_id").cast(pl.String),
        pl.col("passage_id").cast(pl.String),
        pl.col("rank").cast(pl.Int64),
    )
    df = df.filter(pl.col("question_id").is_in(list(question_ids)))
    for col in ("passage_id", "rank"):
        repeated = df.filter(~pl.struct("question_id", col).is_first_distinct())
        if repeated.height:
            raise ValueError(f"run repeats a {col} within question {repeated['question_id'][0]!r}")
    df = df.sort(["question_id", "rank"])
    return df.with_columns(position=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("question_id"))


# --- measure families ---------------------------------------------------------------------------


def recall_at_k(ordered: pl.DataFrame, gold: pl.DataFrame, ks: Sequence[int]) -> pl.DataFrame:
    """``Recall@K = |G ∩ R_K| / |G|`` via ir-measures ``R@K`` (trec_eval ``recall_K``)."""
    return _evaluate(ordered, gold, {f"Recall@{k}": R @ k for k in ks})


def hit_at_k(ordered: pl.DataFrame, gold: pl.DataFrame, ks: Sequence[int]) -> pl.DataFrame:
    """``Hit@K = 1[G ∩ R_K ≠ ∅]`` via ir-measures ``Success@K`` (trec_eval ``success_K``)."""
    return _evaluate(ordered, gold, {f"Hit@{k}": Success @ k for k in ks})


def map_at_10(ordered: pl.DataFrame, gold: pl.DataFrame) -> pl.DataFrame:
    """``AP@10 = (1/|G|) Σ_{i ≤ 10, d_i ∈ G} P@i`` via ir-measures ``AP@10`` (``map_cut_10``).

    The denominator is ``|G|`` (all relevant passages), not ``min(|G|, 10)``.
    """
    return _evaluate(ordered, gold, {"MAP@10": AP @ 10})


def ndcg_at_10(ordered: pl.DataFrame, gold: pl.DataFrame) -> pl.DataFrame:
    """``nDCG@10`` with binary gains and ``log2(i + 1)`` discount, via ``ndcg_cut_10``.

    ``IDCG@10 = Σ_{i ≤ min(|G|, 10)} 1 / log2(i + 1)``.
    """
    return _evaluate(ordered, gold, {"nDCG@10": nDCG @ 10})


def chain_at_k(ordered: pl.DataFrame, gold: pl.DataFrame, ks: Sequence[int]) -> pl.DataFrame:
    """``Chain@K = 1[G ⊆ R_K]``: 1 when every gold passage is within the first ``K`` positions.

    Computed here (ir-measures has no such measure) from the position of the *last* gold passage:
    ``Chain@K = 1[max_{g ∈ G} pos(g) ≤ K]`` with ``pos(g) = ∞`` when ``g`` is not retrieved.
    One row per question of ``gold``, sorted by ``question_id``.
    """
    pos = gold.join(ordered.select("question_id", "passage_id", "position"),
                    on=["question_id", "passage_id"], how="left")  # fmt: skip
    last = pos.group_by("question_id").agg(
        pl.col("position").cast(pl.Float64).fill_null(np.inf).max().alias("last")
    )
    cols = [(pl.col("last") <= k).cast(pl.Float64).alias(f"Chain@{k}") for k in ks]
    return last.select("question_id", *cols).sort("question_id")


def _evaluate(
    ordered: pl.DataFrame, gold: pl.DataFrame, measures: dict[str, ir_measures.Measure]
) -> pl.DataFrame:
    """Run ir-measures' pytrec_eval provider; one column per entry of ``measures``.

    ir-measures is given iterables of its ``Qrel``/``ScoredDoc`` namedtuples built from the
    polars rows, the run with ``score = -position`` so that trec_eval's score sort keeps the
    method's order. Questions absent from the run are absent here (filled with 0 by the caller).
    """
    qrels = [ir_measures.Qrel(q, d, 1) for q, d in gold.select("question_id", "passage_id").iter_rows()]
    run = [ir_measures.ScoredDoc(q, d, -float(p))
           for q, d, p in ordered.select("question_id", "passage_id", "position").iter_rows()]
    names = {str(m): name for name, m in measures.items()}
    values: dict[str, dict[str, float]] = {name: {} for name in measures}
    if run:
        for r in ir_measures.pytrec_eval.iter_calc(list(measures.values()), qrels, run):
            values[names[str(r.measure)]][str(r.query_id)] = float(r.value)
    qids = sorted({q for per in values.values() for q in per})
    columns = {name: [per.get(q) for q in qids] for name, per in values.items()}
    return pl.DataFrame({"question_id": qids, **columns},
                        schema={"question_id": pl.String, **{n: pl.Float64 for n in measures}})


def _check_ks(ks: Sequence[int]) -> list[int]:
    """Validate cut-offs: positive integers; duplicates removed, order kept."""
    out = list(dict.fromkeys(int(k) for k in ks))
    if not out or min(out) < 1:
        raise ValueError(f"cut-offs must be positive integers, got {list(ks)!r}")
    return out


def _as_list_expr(table: pl.DataFrame, column: str) -> pl.Expr:
    """``table[column]`` as a list expression: list columns as they are, a column of bare
    strings (one id per cell) as one-item lists, an all-null column as empty."""
    dtype = table.schema[column]
    if isinstance(dtype, (pl.List, pl.Array)):
        return pl.col(column)
    if dtype in (pl.String, pl.Null):
        return pl.concat_list(pl.col(column).cast(pl.String))
    raise TypeError(f"{column}: expected a list or string column, got {dtype}")


def _as_list(value: object) -> list[object]:
    """Normalise a list-like cell (list, tuple, numpy array from Parquet, None/NaN) to a list."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, float) and np.isnan(value):
        return []
    return list(value)  # type: ignore[call-overload]
