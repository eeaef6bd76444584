"""The retrieval flow of any registered method that has no family flow of its own (a method
added as one package + one params block, :mod:`evichain.methods.base`): the dataset's corpus
and the index tables the method reads (:meth:`~evichain.methods.base.Method.tables`, as the
index stages wrote them), the method built from the registry, every question as a task
(:mod:`flows.questions`). ``stages.retrieve_method`` writes what :func:`run_method` returns."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from prefect import flow

from evichain.config import Params
from evichain.io import MissingArtifactError, read_parquet
from evichain.llm import LLMClient
from evichain.methods.base import BuildContext, get_method, run_frame
from evichain.paths import DatasetPaths
from flows.common import with_runner
from flows.questions import retrieve_questions


@dataclass
class RetrievalOutput:
    """Run, trace and the stage summary."""

    run: pd.DataFrame
    trace: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)


def table_path(paths: DatasetPaths, name: str) -> Path:
    """Where the index stages write table ``name`` (CEE's facets sit beside the corpus)."""
    return paths.dir / "facets.parquet" if name == "facets" else paths.index_file(f"{name}.parquet")


def read_tables(paths: DatasetPaths, names: tuple[str, ...]) -> dict[str, pd.DataFrame]:
    """The named index tables, or a clear error naming the stage to run first."""
    out = {}
    for name in names:
        path = table_path(paths, name)
        if not path.exists():
            raise MissingArtifactError(f"{path}: index table {name!r} missing; run the index "
                                       f"stage that writes it first (see dvc.yaml)")
        out[name] = read_parquet(path)
    return out


@flow(name="retrieve-registered", log_prints=True)
def retrieval_flow(paths: DatasetPaths, method: str, variant: str, params: Params,
                   stage: str) -> RetrievalOutput:
    """Build ``method`` (``variant``) over ``paths`` and retrieve every question."""
    chosen = get_method(method)
    corpus, questions = read_parquet(paths.corpus), read_parquet(paths.questions)
    clients: list[LLMClient] = []

    def make_client(llm: Any) -> LLMClient:
        clients.append(LLMClient(llm, stage=stage))
        return clients[-1]

    gold = {q: list(g) for q, g in zip(questions["question_id"], questions["gold_passage_ids"])}
    ctx = BuildContext(corpus=corpus, params=params, make_client=make_client, gold=gold,
                       tables=read_tables(paths, chosen.tables(params, variant)))
    retriever = chosen.build(ctx, variant)
    start = time.perf_counter()
    results = retrieve_questions(retriever, questions["question_id"], questions["question"],
                                 params.orchestration, label=method)
    run = run_frame(results)
    trace = pd.DataFrame([{"question_id": qid, **r.trace} for qid, r in
                          zip(questions["question_id"], results)])
    usage: dict[str, Any] = {}
    for client in clients:
        for key, value in client.usage.as_dict().items():
            if isinstance(value, (int, float)):
                usage[key] = usage.get(key, 0) + value
    compute = [r.seconds.get("compute", np.nan) * 1e3 for r in results]
    summary = {"method": method, "questions": len(results), "llm_usage": usage,
               "wall_s": round(time.perf_counter() - start, 3)}
    if not np.all(np.isnan(compute)):
        summary["latency_compute"] = {"p50_ms": round(float(np.nanpercentile(compute, 50)), 3),
                                      "p95_ms": round(float(np.nanpercentile(compute, 95)), 3)}
    return RetrievalOutput(run, trace, summary)


def run_method(paths: DatasetPaths, method: str, variant: str, params: Params,
               stage: str) -> RetrievalOutput:
    """:func:`retrieval_flow` on the task runner selected by ``orchestration``."""
    return with_runner(retrieval_flow, params.orchestration)(paths, method, variant, params, stage)
