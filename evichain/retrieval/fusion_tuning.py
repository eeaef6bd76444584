"""The weight w of a two-run score fusion, chosen on a tuning sample only (ours, issue 38).

Two fused methods are tuned this way, both with :func:`evichain.retrieval.fusion.score_fusion`
(the ``fuse`` stage's code) and scored with :mod:`evichain.metrics.retrieval`:

* ``evireform-fused`` (stage ``tune_fusion``): EviReform ``robust`` with weight w, PropRAG with
  1 − w; the chosen w goes into ``params.yaml``'s ``fusion.weights`` by hand (a test checks
  that they agree), as ``tune_evireform``'s choice goes into ``evireform.robust``;
* ``seeds-fused`` (stage ``tune_seed_fusion``): EviReform ``robust`` (w) with CEE ``robust``
  (1 − w); its record is the params file the ``fuse_seeds`` stage fuses by.

For w ∈ :data:`GRID` = {0, 0.1, …, 1}, :func:`grid` scores the fused run (w = 1: the first
run alone, w = 0: the second) and :func:`choose` applies :data:`RULE`: the w that maximises
R@5 + Chain@5; among ties, the median of the tied w, rounded to 0.1. :func:`simplex` is a
table for reading only (every weighting of more runs on a 0.1 simplex; no choice is made from
it). The records and the readable tables are built here; the stages only load the runs and
write the files.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
from tabulate import tabulate

from evichain.metrics.frames import mean
from evichain.metrics.retrieval import per_question_frame
from evichain.retrieval.fusion import score_fusion

if TYPE_CHECKING:
    import pandas as pd

    #: A run or questions table: polars, or pandas from a caller not yet migrated.
    Frame = pl.DataFrame | pd.DataFrame

METRICS = ("Recall@5", "Chain@5", "Recall@10", "nDCG@10")
RULE = "max Recall@5 + Chain@5; ties: median of the tied w, rounded to 0.1"
GRID = tuple(round(0.1 * i, 1) for i in range(11))

#: evireform-fused: the runs (``fusion.runs``) and the grid's column names
FUSED_LABELS = ("w (robust)", "1 − w (PropRAG)")
#: seeds-fused: the runs the record names and the grid's column names
SEED_RUNS = ("evireform-robust", "cee-robust")
SEED_LABELS = ("w (EviReform robust)", "1 − w (CEE robust)")

def scores(run: Frame, questions: Frame) -> dict[str, float]:
    """Mean metrics of ``run`` over ``questions``: round(100 · mean_q m(q), 2) for m in
    :data:`METRICS` (the mean summed by numpy, :func:`evichain.metrics.frames.mean`)."""
    per_q, _ = per_question_frame(run, questions)
    return {m: round(100 * mean(per_q[m]), 2) for m in METRICS}


def fused_at(first: Frame, second: Frame, w: float, depth: int) -> pd.DataFrame:
    """The fused run with weight w on ``first`` and 1 − w on ``second`` (the ``fuse`` stage's
    code)."""
    return score_fusion({"robust": first, "proprag": second},
                        {"robust": w, "proprag": round(1 - w, 1)}, depth)


def grid(first: Frame, second: Frame, questions: Frame, depth: int,
         labels: tuple[str, str] = FUSED_LABELS) -> pl.DataFrame:
    """One row per weight w of :data:`GRID` on ``first`` (``second`` gets 1 − w): the two
    weights, in columns named ``labels``, then :data:`METRICS`."""
    rows = []
    for w in GRID:
        fused = fused_at(first, second, w, depth)
        rows.append({labels[0]: w, labels[1]: round(1 - w, 1), **scores(fused, questions)})
    return pl.DataFrame(rows)


def choose(table: Frame, column: str = FUSED_LABELS[0]) -> float:
    """:data:`RULE`: t = Recall@5 + Chain@5 per row; the median of ``column`` over the rows
    with t ≈ max t (``np.isclose``), rounded to 0.1."""
    total = (table["Recall@5"] + table["Chain@5"]).to_numpy()
    tied = table[column].to_numpy()[np.isclose(total, total.max())]
    return round(float(np.median(tied)), 1)


def simplex(runs: Mapping[str, Frame], questions: Frame, depth: int) -> pl.DataFrame:
    """Every weighting of ``runs`` on the 0.1 simplex (weights k_m / 10 with Σ k_m = 10),
    ``R@5 + Chain@5`` descending, ties in enumeration order (for reading only)."""
    rows = []
    for ks in itertools.product(range(11), repeat=len(runs)):
        if sum(ks) != 10:
            continue
        w = {name: k / 10 for name, k in zip(runs, ks)}
        rows.append({**{f"w {n}": x for n, x in w.items()},
                     **scores(score_fusion(runs, w, depth), questions)})
    table = pl.DataFrame(rows).with_columns(
        (pl.col("Recall@5") + pl.col("Chain@5")).alias("R@5 + Chain@5"))
    return table.sort("R@5 + Chain@5", descending=True, maintain_order=True)


def markdown_table(table: pl.DataFrame) -> str:
    """``table`` as a Markdown pipe table (tabulate's ``pipe`` format, the format of pandas'
    ``to_markdown(index=False)``)."""
    return tabulate(table.rows(), headers=table.columns, tablefmt="pipe")


def fusion_record(dataset: str, n_questions: int, table: pl.DataFrame, w: float,
                  params_weights: Sequence[float]) -> dict[str, Any]:
    """``evireform-fused``'s JSON record (``reports/tuning/<dataset>-fusion.json``): dataset,
    question count, rule, grid, metrics, chosen w, ``fusion.weights`` at the time, grid rows."""
    return {"dataset": dataset, "n_questions": n_questions, "rule": RULE, "grid": list(GRID),
            "metrics": list(METRICS), "chosen_w": w, "params_weights": list(params_weights),
            "rows": table.to_dicts()}


def seed_record(dataset: str, n_questions: int, table: pl.DataFrame, w: float,
                runs: Sequence[str], depth: int, bridge_inherit: float) -> dict[str, Any]:
    """``seeds-fused``'s JSON record (``reports/tuning/<dataset>-seed_fusion.json``, the
    ``fuse_seeds`` stage's params file): runs, depth, chosen w, CEE's γ at the time, grid rows."""
    return {"dataset": dataset, "n_questions": n_questions, "rule": RULE, "grid": list(GRID),
            "runs": list(runs), "chosen_w": w, "depth": depth, "bridge_inherit": bridge_inherit,
            "rows": table.to_dicts()}


def fusion_markdown(dataset: str, n_questions: int, table: pl.DataFrame, w: float, depth: int,
                    params_weights: Sequence[float], seconds: float, command: str) -> str:
    """The readable form of :func:`fusion_record` (``command``: how it was made); ``seconds``:
    PropRAG's wall time on the tuning sample."""
    return (f"# evireform-fused weights: {dataset} ({n_questions} questions, tuning only)\n\n"
            f"`{command}`. Fused = w · robust/max + (1 − w) · PropRAG/max per question "
            f"(evichain/retrieval/fusion.py), top {depth}. Rule: best R@5 + Chain@5, middle of "
            f"the ties → **w = {w}** (params.yaml `fusion.weights` = {list(params_weights)}). "
            f"PropRAG ran here in {seconds:.1f} s wall for {n_questions} questions (index load "
            "included).\n\n" + markdown_table(table) + "\n")


def seed_markdown(dataset: str, n_questions: int, table: pl.DataFrame, w: float,
                  runs: Sequence[str], depth: int, bridge_inherit: float, command: str,
                  explore: Sequence[str] = (), explored: pl.DataFrame | None = None) -> str:
    """The readable form of :func:`seed_record`; with ``explore`` (extra run names), the 10
    best rows of their :func:`simplex` table ``explored`` after it."""
    text = (f"# seeds-fused weights: {dataset} ({n_questions} questions, tuning only)\n\n"
            f"`{command}`. Fused = w · {runs[0]}/max + (1 − w) · {runs[1]}/max per question "
            f"(evichain/retrieval/fusion.py), top {depth} (= fusion.depth); "
            f"cee.bridge_inherit = {bridge_inherit}. Rule: {RULE} → **w = {w}** (read by "
            "the fuse_seeds stage from the JSON record).\n\n" + markdown_table(table)
            + "\n")
    if explore and explored is not None:
        text += ("\n## Exploration (for reading only): with " + ", ".join(explore)
                 + ", the 10 best weightings\n\n"
                 + markdown_table(explored.head(10)) + "\n")
    return text
