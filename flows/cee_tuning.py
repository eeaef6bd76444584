"""CEE tuning flow (``tune_cee``): CEE ``robust``'s exploration once per question (one Prefect
task each, LLM answers through the client and its cache), then its pools ranked for every γ of
``cee.tuning.bridge_inherit`` (:mod:`evichain.methods.cee.tuning`). Retrieval and facets are
:mod:`flows.cee`'s; this module reuses their encoders and facet bank.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from prefect import flow

from evichain.config import EmbedParams, LLMParams, OrchestrationParams
from evichain.embed import get_embedder
from evichain.io import read_parquet
from evichain.llm import LLMClient
from evichain.methods.cee.explore import ExploreLLM
from evichain.methods.cee.facets import load_passages
from evichain.methods.cee.params import CEEParams, variant_params
from evichain.methods.cee.retrieve import CEERetriever
from evichain.methods.cee.tuning import choose, grid_table
from evichain.paths import DatasetPaths
from evichain.retrieval.run import format_passages
from flows.cee import sentence_facet_bank
from flows.common import with_runner
from flows.questions import QuestionFn, retrieve_questions
from flows.retrieve import encode_all


@dataclass
class TuningOutput:
    """The γ grid (one row per value), the chosen γ and the stage summary."""

    table: pd.DataFrame
    chosen: float
    summary: dict[str, Any] = field(default_factory=dict)


@flow(name="cee-tune", log_prints=True)
def tuning_flow(paths: DatasetPaths, params: CEEParams, llm: LLMParams, embed: EmbedParams,
                orch: OrchestrationParams, stage: str = "tune_cee") -> TuningOutput:
    """``robust``'s exploration once per question (one task each), then its pools ranked for
    every γ of ``params.tuning.bridge_inherit`` (:mod:`evichain.methods.cee.tuning`)."""
    robust = variant_params(params, "robust")
    corpus, questions = read_parquet(paths.corpus), read_parquet(paths.questions)
    passages = load_passages(corpus)
    E = encode_all(format_passages(corpus, robust.passage_format), embed, orch, "passages")
    bank, facet_info = sentence_facet_bank(passages, E, robust.facets, embed, orch)
    encode_all(questions["question"].tolist(), embed, orch, "questions")
    client = LLMClient(llm, stage=stage)
    retriever = CEERetriever(E, passages, bank, robust, ExploreLLM(client, robust),
                             get_embedder(embed).encode)
    explored = retrieve_questions(QuestionFn(lambda qid, q: (qid, retriever.explorer.run(q))),
                                  questions["question_id"], questions["question"], orch,
                                  "cee-explore")
    table = grid_table(explored, retriever.E, bank, passages, robust, questions,
                       params.tuning.bridge_inherit, params.tuning.objective)
    failures = sum(len(ex.failures) for _, ex in explored)
    summary = {"questions": len(questions), "objective": list(params.tuning.objective),
               "configurations": len(table), "facets": facet_info,
               "bridge_added": sum(len(ex.bridge_rows) for _, ex in explored),
               "exploration_failures": failures, "llm_usage": client.usage.as_dict()}
    return TuningOutput(table, choose(table), summary)


def run_tuning(*args: Any, orch: OrchestrationParams, **kwargs: Any) -> TuningOutput:
    """:func:`tuning_flow` on the task runner selected by ``orchestration``."""
    return with_runner(tuning_flow, orch)(*args, orch=orch, **kwargs)
