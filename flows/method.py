"""The one retrieval flow of every registered method, for ``dvc repro`` and ``evichain run``.

1. Read the dataset's corpus and questions and the tables the method reads
   (:meth:`~evichain.methods.base.Method.tables`, as the index stages wrote them).
2. Build the method through the registry (:meth:`Method.index`, then :meth:`Method.build`),
   with the flow's services: bulk encodings fan out over tasks (:func:`flows.retrieve.encode_all`,
   embedding cache first) and one LLM client per distinct LLM setting, created in the flow's
   thread (a local model server is tied to this process). The questions are encoded first, in
   bulk, so a method that encodes its question inside the per-question task reads it from the
   embedding cache.
3. Every question is one task (:func:`flows.questions.retrieve_questions`: retries, progress).
   On Dask the built retriever stays in the flow's process: the tasks carry a
   :class:`MethodSpec` (paths, method, variant, params: small and picklable) and every worker
   process builds the method's index, retriever and LLM clients from it once
   (:func:`flows.questions.retrieve_on_workers`); the workers' LLM usage comes back with their
   answers and is added to the flow's.
4. One output (:class:`MethodOutput`): the run, one trace row per question, the evidence rows of
   the methods that keep their own reading context, and the stage summary (the method's own
   counts from :meth:`Method.summary`, LLM usage summed over its clients, latency).

Family flows (``flows/evireform.py``, ``flows/graph.py``, ``flows/cee.py``) hold only the index
steps (extraction, OpenIE, facets). Flows take paths and params, never tables: Prefect stores
flow parameters in its API (at most 512 KB).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
from prefect import flow
from prefect.context import TaskRunContext

from evichain.config import EmbedParams, LLMParams, OrchestrationParams, Params
from evichain.embed import get_embedder
from evichain.io import MissingArtifactError, read_table
from evichain.llm import LLMClient, Usage
from evichain.methods.base import BuildContext, Method, QuestionResult, get_method, latency_ms, run_frame
from evichain.paths import DatasetPaths
from flows.common import on_dask, with_runner
from flows.questions import WorkerBuild, flow_env, retrieve_on_workers, retrieve_questions, sum_usage
from flows.retrieve import encode_all


@dataclass
class MethodOutput:
    """A method's stage tables: run, trace (one row per question), evidence (or None), the
    stage summary, and the LLM tokens of the questions' answers (counted whether an answer came
    from the model or the cache, :attr:`QuestionResult.usage`)."""

    run: pd.DataFrame
    trace: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)
    evidence: pl.DataFrame | None = None
    tokens: dict[str, int] = field(default_factory=dict)


def table_path(paths: DatasetPaths, name: str) -> Path:
    """Where table ``name`` lives: ``facets`` beside the corpus, ``runs/<m>`` a first-stage
    run, every other name under ``index/``."""
    if name == "facets":
        return paths.dir / "facets.parquet"
    if name.startswith("runs/"):
        return paths.run(name.removeprefix("runs/"))
    return paths.index_file(f"{name}.parquet")


def read_tables(paths: DatasetPaths, names: Sequence[str]) -> dict[str, pl.DataFrame]:
    """The named tables (polars), or a clear error naming the stage to run first."""
    out = {}
    for name in names:
        path = table_path(paths, name)
        if not path.exists():
            raise MissingArtifactError(f"{path}: table {name!r} missing; run the stage that "
                                       f"writes it first (see dvc.yaml)")
        out[name] = read_table(path)
    return out


class FlowEncoder:
    """The embedding service as a flow sees it: bulk encodings in the flow's thread fan out
    over tasks (:func:`encode_all`); inside a task (one question) the embedder is called
    directly. Both read and fill the same embedding cache."""

    def __init__(self, embed: EmbedParams, orch: OrchestrationParams) -> None:
        self.embed, self.orch = embed, orch

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        if TaskRunContext.get() is None:
            return encode_all(list(texts), self.embed, self.orch, "texts")
        return get_embedder(self.embed).encode(list(texts))


class StageClients:
    """One LLM client per distinct LLM setting of a run (the sampling methods ask for one per
    sample seed); their usage sums to the stage's."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self.clients: dict[str, LLMClient] = {}
        self._lock = threading.Lock()

    def __call__(self, llm: LLMParams) -> LLMClient:
        key = llm.model_dump_json()
        with self._lock:
            if key not in self.clients:
                self.clients[key] = LLMClient(llm, stage=self.stage)
            return self.clients[key]

    def usage(self) -> dict[str, Any]:
        """Usage summed over the clients (``{"calls": 0}`` when the method made none)."""
        if not self.clients:
            return {"calls": 0}
        total = Usage()
        for client in self.clients.values():
            total.add(client.usage)
        return total.as_dict()


def build_context(paths: DatasetPaths, method: Method, variant: str | None, params: Params,
                  clients: StageClients) -> tuple[BuildContext, pl.DataFrame]:
    """The method's :class:`BuildContext` over ``paths`` and the questions table (polars)."""
    corpus, questions = read_table(paths.corpus), read_table(paths.questions)
    gold = {str(q): [str(g) for g in gs]
            for q, gs in zip(questions["question_id"].to_list(),
                             questions["gold_passage_ids"].to_list())}
    ctx = BuildContext(corpus=corpus, params=params, make_client=clients,
                       encode=FlowEncoder(params.embed, params.orchestration), gold=gold,
                       tables=read_tables(paths, method.tables(params, variant)),
                       questions=questions)
    return ctx, questions


def prepare(paths: DatasetPaths, method: Method, variant: str | None, params: Params,
            clients: StageClients) -> tuple[BuildContext, pl.DataFrame, Any]:
    """The context, the questions (encoded first, in bulk, so a method that encodes its question
    inside a task reads it from the embedding cache) and the method's index for ``variant``."""
    ctx, questions = build_context(paths, method, variant, params, clients)
    ctx.encoder()([str(q) for q in questions["question"].to_list()])
    return ctx, questions, method.index(ctx, variant)


def assemble(method: Method, variant: str | None, params: Params, questions: pl.DataFrame,
             results: Sequence[QuestionResult], index: Any, usage: dict[str, Any],
             wall_s: float) -> MethodOutput:
    """The stage tables of one run: the method's summary first, then LLM usage and latency."""
    trace = pd.DataFrame([{"question_id": str(q), **r.trace}
                          for q, r in zip(questions["question_id"].to_list(), results)])
    evidence = method.evidence_table(results)
    summary: dict[str, Any] = {"method": method.name, "questions": len(results),
                               **method.summary(params, variant, trace, results, index)}
    for key in ("compute", "encode"):
        if any(key in r.seconds for r in results):
            summary.setdefault(f"latency_{key}", latency_ms(results, key))
    summary["llm_usage"] = usage
    summary["wall_s"] = round(wall_s, 3)
    tokens = {k: sum(r.usage[k] for r in results) for k in ("prompt_tokens", "completion_tokens")}
    return MethodOutput(run_frame(results), trace, summary, evidence, tokens)


@dataclass(frozen=True)
class MethodSpec:
    """What a Dask worker needs to build ``method`` (``variant``) for one flow run
    (:class:`flows.questions.WorkerSpec`): the dataset's paths (absolute, so a worker in another
    directory reads the same files), the registered method (it pickles as its class: the worker
    imports the method's module, as ``get_method`` would), the params, the stage (its LLM
    clients' name), ``key`` (the run: a worker builds once per run) and the flow's
    ``EVICHAIN_*`` environment."""

    paths: DatasetPaths
    method: Method
    variant: str | None
    params: Params
    stage: str
    key: str
    env: dict[str, str]

    @classmethod
    def of_run(cls, paths: DatasetPaths, method: Method, variant: str | None, params: Params,
               stage: str) -> MethodSpec:
        """The spec of a new run of ``method`` over ``paths`` (a fresh key)."""
        return cls(DatasetPaths(paths.dataset, paths.root.resolve()), method, variant, params,
                   stage, f"{method.label(variant)}-{uuid.uuid4().hex}", flow_env())

    def build(self) -> WorkerBuild:
        """The method's context, index and retriever built in this process, with LLM clients of
        its own (their usage is the build's)."""
        clients = StageClients(self.stage)
        ctx, _ = build_context(self.paths, self.method, self.variant, self.params, clients)
        retriever = self.method.build(ctx, self.variant, self.method.index(ctx, self.variant))
        return WorkerBuild(retriever, clients.usage, self.method.compute_limits)


@flow(name="retrieve-method", log_prints=True)
def retrieval_flow(paths: DatasetPaths, method: str, variant: str | None, params: Params,
                   stage: str) -> MethodOutput:
    """Build ``method`` (``variant``) over ``paths`` and retrieve every question (module
    docstring, steps 1-4)."""
    chosen = get_method(method)
    clients = StageClients(stage)  # build() makes them in this thread (a local server's owner)
    ctx, questions, index = prepare(paths, chosen, variant, params, clients)
    if on_dask():
        start = time.perf_counter()
        spec = MethodSpec.of_run(paths, chosen, variant, params, stage)
        results, usage = retrieve_on_workers(spec, questions["question_id"].to_list(),
                                             questions["question"].to_list(),
                                             params.orchestration, label=chosen.label(variant))
        return assemble(chosen, variant, params, questions, results, index,
                        sum_usage([clients.usage(), usage]), time.perf_counter() - start)
    retriever = chosen.build(ctx, variant, index)
    start = time.perf_counter()
    with chosen.compute_limits():
        results = retrieve_questions(retriever, questions["question_id"].to_list(),
                                     questions["question"].to_list(),
                                     params.orchestration, label=chosen.label(variant))
    return assemble(chosen, variant, params, questions, results, index, clients.usage(),
                    time.perf_counter() - start)


def run_method(paths: DatasetPaths, method: str, variant: str | None, params: Params,
               stage: str) -> MethodOutput:
    """:func:`retrieval_flow` on the task runner selected by ``orchestration``."""
    return with_runner(retrieval_flow, params.orchestration)(paths, method, variant, params, stage)
