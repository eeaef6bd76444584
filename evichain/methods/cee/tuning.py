"""Tuning of CEE ``robust``'s bridge score inheritance (ours, issue 38) on a tuning sample.

Exploration (Eq. 1, the LLM's probes and summaries, the bridge pool) does not depend on
γ = ``cee.bridge_inherit``: γ only changes s(d) of the bridge passages before Eq. 8
(:func:`~evichain.methods.cee.bridge.inherit_scores`). So each question is explored once and
its pool ranked once per γ of ``cee.tuning.bridge_inherit``.

A value's objective is Σ_m mean_q m(q) over ``cee.tuning.objective`` (per-question metrics of
:mod:`evichain.metrics.retrieval`, e.g. Recall@5 + Chain@5). The choice is the highest
objective; ties go to the value listed first (0.0, i.e. off, is listed first by default, so
inheritance is switched on only when it wins).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from evichain.methods.cee.explore import Exploration
from evichain.methods.cee.facets import Passage
from evichain.methods.cee.params import CEEParams
from evichain.methods.cee.retrieve import rank_pool, run_rows
from evichain.methods.cee.scoring import FacetBank
from evichain.metrics.frames import mean
from evichain.metrics.retrieval import per_question_frame
from evichain.retrieval.run import run_rows as polars_run

if TYPE_CHECKING:
    import pandas as pd


def ranked_rows(question_id: str, ex: Exploration, E: np.ndarray, bank: FacetBank,
                passages: Sequence[Passage], params: CEEParams) -> list[tuple[str, int, str, float]]:
    """The run rows of one explored question under ``params`` (as the retriever writes them)."""
    ranked = rank_pool(ex.probe_vectors, E, bank, ex.pool, params, ex.bridge_rows,
                       ex.bridge_sources)
    return run_rows(question_id, ranked, passages)


def grid_table(explored: Sequence[tuple[str, Exploration]], E: np.ndarray, bank: FacetBank,
               passages: Sequence[Passage], params: CEEParams, questions: pl.DataFrame | pd.DataFrame,
               values: Sequence[float], objective: Sequence[str]) -> pl.DataFrame:
    """One row per γ in ``values``: γ, the objective Σ_{m ∈ objective} mean_q m(q) (summed
    in ``objective`` order) and mean_q m(q) of every metric m (×1; the mean summed by numpy,
    :func:`evichain.metrics.frames.mean`)."""
    rows = []
    for gamma in values:
        p = params.model_copy(update={"bridge_inherit": float(gamma)})
        run = polars_run([r for qid, ex in explored for r in ranked_rows(qid, ex, E, bank, passages, p)])
        per_q, _ = per_question_frame(run, questions)
        missing = [m for m in objective if m not in per_q.columns]
        if missing:
            raise ValueError(f"cee.tuning.objective: unknown metric(s) {missing}")
        means = {m: mean(per_q[m]) for m in per_q.columns if m != "question_id"}
        rows.append({"bridge_inherit": float(gamma),
                     "objective": float(sum(means[m] for m in objective)), **means})
    return pl.DataFrame(rows)


def choose(table: pl.DataFrame | pd.DataFrame) -> float:
    """γ of the first row with the highest objective (module docstring)."""
    best = int(table["objective"].to_numpy().argmax())
    return float(table["bridge_inherit"].to_numpy()[best])
