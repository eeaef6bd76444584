"""CEE tuning flow (``tune_cee``): CEE ``robust`` from the registry (its index and retriever, as
every stage builds them: :meth:`~evichain.methods.base.Method.build`), its exploration once per
question (one Prefect task each, LLM answers through the client and its cache), then its pools
ranked for every γ of ``cee.tuning.bridge_inherit`` (:mod:`evichain.methods.cee.tuning`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl
from prefect import flow

from evichain.config import Params
from evichain.methods.base import get_method
from evichain.methods.cee.params import variant_params
from evichain.methods.cee.tuning import choose, grid_table
from evichain.paths import DatasetPaths
from flows.common import with_runner
from flows.method import StageClients, prepare
from flows.questions import QuestionFn, retrieve_questions


@dataclass
class TuningOutput:
    """The γ grid (one row per value), the chosen γ and the stage summary."""

    table: pl.DataFrame
    chosen: float
    summary: dict[str, Any] = field(default_factory=dict)


@flow(name="cee-tune", log_prints=True)
def tuning_flow(paths: DatasetPaths, params: Params, stage: str = "tune_cee") -> TuningOutput:
    """``robust``'s exploration once per question (one task each), then its pools ranked for
    every γ of ``cee.tuning.bridge_inherit`` (:mod:`evichain.methods.cee.tuning`)."""
    cee = get_method("cee")
    robust = variant_params(params.cee, "robust")
    clients = StageClients(stage)
    ctx, questions, index = prepare(paths, cee, "robust", params, clients)
    retriever = cee.build(ctx, "robust", index).inner
    explored = retrieve_questions(QuestionFn(lambda qid, q: (qid, retriever.explorer.run(q))),
                                  questions["question_id"], questions["question"],
                                  params.orchestration, "cee-explore")
    table = grid_table(explored, index.E, index.bank, index.passages, robust, questions,
                       params.cee.tuning.bridge_inherit, params.cee.tuning.objective)
    failures = sum(len(ex.failures) for _, ex in explored)
    summary = {"questions": len(questions), "objective": list(params.cee.tuning.objective),
               "configurations": len(table), "facets": index.facet_info,
               "bridge_added": sum(len(ex.bridge_rows) for _, ex in explored),
               "exploration_failures": failures, "llm_usage": clients.usage()}
    return TuningOutput(table, choose(table), summary)


def run_tuning(paths: DatasetPaths, params: Params, stage: str = "tune_cee") -> TuningOutput:
    """:func:`tuning_flow` on the task runner selected by ``orchestration``."""
    return with_runner(tuning_flow, params.orchestration)(paths, params, stage)
