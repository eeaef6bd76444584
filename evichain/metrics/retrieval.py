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
  the excluded ids are stored in ``DataFrame.attrs["excluded_empty_gold"]`` and counted by
  :func:`aggregate`. Run rows for questions absent from the questions table are ignored.
* A run must not repeat a passage or a rank within one question (``ValueError`` otherwise):
  trec_eval would silently keep one copy and shift the cut-offs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import ir_measures
import numpy as np
import pandas as pd
from ir_measures import AP, R, Success, nDCG

log = logging.getLogger(__name__)

DEFAULT_KS: tuple[int, ...] = (1, 2, 5, 10, 20)
EXCLUDED_ATTR = "excluded_empty_gold"


def per_question_metrics(
    run: pd.DataFrame, questions: pd.DataFrame, ks: Sequence[int] = DEFAULT_KS
) -> pd.DataFrame:
    """One row per evaluable question: ``question_id`` and every metric of the module docstring.

    Columns, in order: ``question_id``, ``Recall@K`` for each ``K`` in ``ks``, then ``Chain@K``,
    ``Hit@K``, ``MAP@10`` and ``nDCG@10``; rows sorted by ``question_id``. Questions with an empty
    gold set are excluded and listed in ``attrs["excluded_empty_gold"]``.
    """
    ks = _check_ks(ks)
    gold, excluded = gold_table(questions)
    if excluded:
        log.info("excluded %d question(s) with no gold passage", len(excluded))
    qids = pd.Index(sorted(gold["question_id"].unique()), name="question_id")
    ordered = ordered_run(run, qids)
    families = [
        recall_at_k(ordered, gold, ks),
        chain_at_k(ordered, gold, ks),
        hit_at_k(ordered, gold, ks),
        map_at_10(ordered, gold),
        ndcg_at_10(ordered, gold),
    ]
    table = pd.concat([f.reindex(qids, fill_value=0.0) for f in families], axis=1)
    table = table.astype("float64").reset_index()
    table.attrs[EXCLUDED_ATTR] = excluded
    return table


def aggregate(per_q: pd.DataFrame) -> dict[str, float]:
    """Mean of every numeric metric column over questions, plus counts.

    Keys: each metric column (``mean_q value_q``; 0.0 for an empty table), ``n_questions`` (rows
    averaged), ``n_<key>`` for every ``attrs["excluded_*"]`` list (``n_excluded_empty_gold`` from
    :func:`per_question_metrics`, ``n_excluded_no_answer`` from ``qa_per_question``) and, when a
    ``status`` column is present (QA tables), ``n_failed`` = rows whose status is not ``"ok"``.
    ``attrs`` do not survive :func:`evichain.io.write_parquet`: aggregate the in-memory table.
    """
    numeric = per_q.drop(columns=["question_id"], errors="ignore").select_dtypes("number")
    out: dict[str, float] = {c: float(numeric[c].mean()) if len(numeric) else 0.0 for c in numeric}
    out["n_questions"] = int(len(per_q))
    for key, ids in sorted(per_q.attrs.items()):
        if key.startswith("excluded_"):
            out[f"n_{key}"] = int(len(ids))
    if "status" in per_q.columns:
        out["n_failed"] = int((per_q["status"] != "ok").sum())
    return out


# --- inputs -------------------------------------------------------------------------------------


def gold_table(questions: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Explode ``gold_passage_ids`` into unique ``(question_id, passage_id)`` pairs.

    Returns the pairs (sorted) and the sorted ids of questions whose gold set is empty.
    """
    rows = [
        (str(qid), str(pid))
        for qid, golds in zip(questions["question_id"], questions["gold_passage_ids"], strict=True)
        for pid in _as_list(golds)
    ]
    gold = pd.DataFrame(rows, columns=["question_id", "passage_id"], dtype="object")
    gold = gold.drop_duplicates().sort_values(["question_id", "passage_id"], ignore_index=True)
    with_gold = set(gold["question_id"])
    excluded = sorted({str(q) for q in questions["question_id"]} - with_gold)
    return gold, excluded


def ordered_run(run: pd.DataFrame, question_ids: Iterable[str]) -> pd.DataFrame:
    """Run rows of ``question_ids`` sorted by rank, with a 1-based ``position`` per question.

    ``position`` (not the raw ``rank`` value) defines ``R_K``; ranks need not start at 1 or be
    contiguous, but must be unique per question, and so must passage ids.
    """
    df = pd.DataFrame(
        {
            "question_id": run["question_id"].astype(str).astype(object),
            "passage_id": run["passage_id"].astype(str).astype(object),
            "rank": run["rank"].astype("int64"),
        }
    )
    df = df[df["question_id"].isin(set(question_ids))]
    for col in ("passage_id", "rank"):
        dup = df.duplicated(["question_id", col])
        if dup.any():
            qid = df.loc[dup, "question_id"].iloc[0]
            raise ValueError(f"run repeats a {col} within question {qid!r}")
    df = df.sort_values(["question_id", "rank"], ignore_index=True)
    df["position"] = df.groupby("question_id").cumcount() + 1
    return df


# --- measure families ---------------------------------------------------------------------------


def recall_at_k(ordered: pd.DataFrame, gold: pd.DataFrame, ks: Sequence[int]) -> pd.DataFrame:
    """``Recall@K = |G ∩ R_K| / |G|`` via ir-measures ``R@K`` (trec_eval ``recall_K``)."""
    return _evaluate(ordered, gold, {f"Recall@{k}": R @ k for k in ks})


def hit_at_k(ordered: pd.DataFrame, gold: pd.DataFrame, ks: Sequence[int]) -> pd.DataFrame:
    """``Hit@K = 1[G ∩ R_K ≠ ∅]`` via ir-measures ``Success@K`` (trec_eval ``success_K``)."""
    return _evaluate(ordered, gold, {f"Hit@{k}": Success @ k for k in ks})


def map_at_10(ordered: pd.DataFrame, gold: pd.DataFrame) -> pd.DataFrame:
    """``AP@10 = (1/|G|) Σ_{i ≤ 10, d_i ∈ G} P@i`` via ir-measures ``AP@10`` (``map_cut_10``).

    The denominator is ``|G|`` (all relevant passages), not ``min(|G|, 10)``.
    """
    return _evaluate(ordered, gold, {"MAP@10": AP @ 10})


def ndcg_at_10(ordered: pd.DataFrame, gold: pd.DataFrame) -> pd.DataFrame:
    """``nDCG@10`` with binary gains and ``log2(i + 1)`` discount, via ``ndcg_cut_10``.

    ``IDCG@10 = Σ_{i ≤ min(|G|, 10)} 1 / log2(i + 1)``.
    """
    return _evaluate(ordered, gold, {"nDCG@10": nDCG @ 10})


def chain_at_k(ordered: pd.DataFrame, gold: pd.DataFrame, ks: Sequence[int]) -> pd.DataFrame:
    """``Chain@K = 1[G ⊆ R_K]``: 1 when every gold passage is within the first ``K`` positions.

    Computed here (ir-measures has no such measure) from the position of the *last* gold passage:
    ``Chain@K = 1[max_{g ∈ G} pos(g) ≤ K]`` with ``pos(g) = ∞`` when ``g`` is not retrieved.
    """
    pos = gold.merge(ordered[["question_id", "passage_id", "position"]], how="left")
    last = pos["position"].astype("float64").fillna(np.inf).groupby(pos["question_id"]).max()
    cols = {f"Chain@{k}": (last <= k).astype("float64") for k in ks}
    return pd.DataFrame(cols).rename_axis("question_id")


def _evaluate(
    ordered: pd.DataFrame, gold: pd.DataFrame, measures: dict[str, ir_measures.Measure]
) -> pd.DataFrame:
    """Run ir-measures' pytrec_eval provider; one column per entry of ``measures``.

    The run is passed with ``score = -position`` so that trec_eval's score sort keeps the
    method's order. Questions absent from the run are absent here (filled with 0 by the caller).
    """
    qrels = pd.DataFrame(
        {"query_id": gold["question_id"], "doc_id": gold["passage_id"], "relevance": 1}
    )
    run = pd.DataFrame(
        {
            "query_id": ordered["question_id"],
            "doc_id": ordered["passage_id"],
            "score": -ordered["position"].astype("float64"),
        }
    )
    names = {str(m): name for name, m in measures.items()}
    values: dict[str, dict[str, float]] = {name: {} for name in measures}
    if len(run):
        for r in ir_measures.pytrec_eval.iter_calc(list(measures.values()), qrels, run):
            values[names[str(r.measure)]][str(r.query_id)] = float(r.value)
    return pd.DataFrame(values, columns=list(measures), dtype="float64").rename_axis("question_id")


def _check_ks(ks: Sequence[int]) -> list[int]:
    """Validate cut-offs: positive integers; duplicates removed, order kept."""
    out = list(dict.fromkeys(int(k) for k in ks))
    if not out or min(out) < 1:
        raise ValueError(f"cut-offs must be positive integers, got {list(ks)!r}")
    return out


def _as_list(value: object) -> list[object]:
    """Normalise a list-like cell (list, tuple, numpy array from Parquet, None/NaN) to a list."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, float) and np.isnan(value):
        return []
    return list(value)  # type: ignore[call-overload]
