"""Graph retrievers' flows: the shared OpenIE index (per passage) and retrieval (per question).

Extraction (``graph.openie``): ``llm`` runs HippoRAG's NER + triple extraction as one Prefect
task per passage with shard checkpoints under ``$EVICHAIN_CHECKPOINT_DIR`` (a shard's file is
keyed by model, sampling, prompt versions and the passages' texts; passages already ``ok`` in
it are not called again) on top of the LLM cache, like ``extract_propositions``;
``propositions`` builds the triples from the EviReform index without an LLM.

Retrieval: the index (graph, fact / entity / passage vectors) is built once in the flow, the
question vectors are encoded in shards, and each question is one task
(:func:`flows.questions.retrieve_questions`, with progress). The LLM client is created in the
flow's thread first (a local model server is tied to the stage process). Flows take paths and
params, never tables (Prefect stores flow parameters).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from evichain.checkpoint import checkpoint_root, read_shard, write_shard
from evichain.config import EmbedParams, LLMParams, OrchestrationParams, Params, ParamsError
from evichain.embed import get_embedder
from evichain.io import read_parquet
from evichain.llm import LLMClient
from evichain.methods.graph.catrag import CatRAGRetriever
from evichain.methods.graph.hipporag2 import HippoRAG2Retriever, QuestionResult, build_hippo_index
from evichain.methods.graph.llm import GraphLLM, uses_llm
from evichain.methods.graph.openie import (PROMPT_KEYS, STATUS_COLUMNS, TRIPLE_COLUMNS,
                                           PassageTriples, llm_triples, openie_summary,
                                           proposition_triples)
from evichain.methods.graph.params import METHODS, GraphParams
from evichain.methods.graph.proprag import PropRAGRetriever, build_prop_index
from evichain.paths import DatasetPaths
from evichain.retrieval.run import run_table
from flows.common import Progress, shards, with_runner
from flows.questions import retrieve_questions
from flows.read import stage_client
from flows.retrieve import encode_all


# =========================================================================== extraction
@dataclass
class TriplesOutput:
    """The triple and status tables and the stage summary."""

    triples: pd.DataFrame
    status: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)


def shard_key(client: LLMClient, rows: Sequence[tuple[str, str]]) -> str:
    """Hash of (model, sampling, prompt name@versions, passage ids and texts of the shard)."""
    payload = {"model": client.params.model, "sampling": client.sampling(), "prompts": list(PROMPT_KEYS),
               "passages": [(pid, hashlib.sha256(text.encode()).hexdigest()) for pid, text in rows]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:24]


def _load_shard(path: Path) -> dict[str, PassageTriples]:
    """Passages already ``ok`` in a shard checkpoint (unreadable file: none)."""
    data = read_shard(path)
    if data is None:
        return {}
    return {o["status"]["passage_id"]: PassageTriples(o["triples"], o["status"])
            for o in data["outcomes"] if o["status"].get("status") == "ok"}


@task(cache_policy=NO_CACHE, task_run_name="openie-{passage_id}")
def openie_passage(client: LLMClient, passage_id: str, text: str) -> PassageTriples:
    """NER + triples for one passage (never raises: failures come back as status rows)."""
    return llm_triples(client, passage_id, text)


def _llm_openie(rows: list[tuple[str, str]], shard: int, client: LLMClient,
                root: Path) -> tuple[list[PassageTriples], int]:
    """Per-passage tasks with shard checkpoints; returns outcomes and passages resumed."""
    plan = [(root / f"graph-openie-{shard_key(client, chunk)}.json", list(chunk))
            for chunk in shards(rows, shard)]
    done = [_load_shard(path) for path, _ in plan]
    pending = [r for (_, chunk), d in zip(plan, done) for r in chunk if r[0] not in d]
    resumed = len(rows) - len(pending)
    get_run_logger().info("OpenIE: %d passages to call (%d resumed), 2 LLM calls each", len(pending), resumed)
    futures = {pid: openie_passage.submit(client, pid, text) for pid, text in pending}
    progress = Progress(len(rows), "OpenIE (passages)")
    if resumed:
        progress.advance(resumed)
    outcomes: list[PassageTriples] = []
    for (path, chunk), d in zip(plan, done):
        for pid, _ in chunk:
            if pid not in d:
                d[pid] = futures[pid].result()
                progress.advance()
        shard_out = [d[pid] for pid, _ in chunk]
        write_shard(path, shard_out)
        outcomes += shard_out
    return outcomes, resumed


@flow(name="graph-openie", log_prints=True)
def extraction_flow(paths: DatasetPaths, params: GraphParams, openie: str, llm: LLMParams,
                    orch: OrchestrationParams, root: Path | None = None) -> TriplesOutput:
    """Triples + one status row per passage of ``paths.corpus`` (module docstring)."""
    corpus = read_parquet(paths.corpus)
    summary: dict[str, Any] = {}
    if openie == "propositions":
        outcomes = proposition_triples(corpus, *(read_parquet(paths.index_file(f"{n}.parquet"))
                                                 for n in ("propositions", "entities", "incidence")))
        summary["llm_usage"] = {"calls": 0}
    else:
        rows = [(pid, params.passage_format.format(title=t, text=x))
                for pid, t, x in zip(corpus["passage_id"], corpus["title"], corpus["text"])]
        client = LLMClient(llm, stage="extract_triples")
        outcomes, summary["resumed_passages"] = _llm_openie(rows, params.openie_checkpoint_shard,
                                                            client, root or checkpoint_root())
        summary["llm_usage"] = client.usage.as_dict()
    triples = pd.DataFrame([t for o in outcomes for t in o.triples], columns=TRIPLE_COLUMNS)
    status = pd.DataFrame([o.status for o in outcomes], columns=STATUS_COLUMNS)
    summary.update(openie_summary(status, len(triples), openie))
    return TriplesOutput(triples, status, summary)


def run_extraction(*args: Any, orch: OrchestrationParams, **kwargs: Any) -> TriplesOutput:
    """:func:`extraction_flow` on the task runner selected by ``orchestration``."""
    return with_runner(extraction_flow, orch)(*args, orch=orch, **kwargs)


# =========================================================================== retrieval
@dataclass
class RetrievalOutput:
    """Run, trace and the stage summary."""

    run: pd.DataFrame
    trace: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)


def latency(results: Sequence[QuestionResult], key: str) -> dict[str, float]:
    """p50 / p95 / mean milliseconds of one timing (``compute`` excludes LLM calls and
    online encoding)."""
    ms = np.array([r.seconds[key] * 1000.0 for r in results]) if results else np.zeros(1)
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3),
            "p95_ms": round(float(np.percentile(ms, 95)), 3), "mean_ms": round(float(ms.mean()), 3)}


_REPAIRS = ("n_unknown_fact_ids", "n_duplicate_fact_ids", "n_missing_scores", "n_unknown_score_ids",
            "n_duplicate_score_ids", "n_out_of_range_scores")


def retrieval_summary(trace: pd.DataFrame, results: Sequence[QuestionResult]) -> dict[str, Any]:
    """Status / fallback / repair counts, LLM calls and latency of a retrieval run."""
    fallbacks = trace["fallback"][trace["fallback"] != ""].value_counts()
    return {"questions": len(trace),
            "status": {str(k): int(v) for k, v in trace["status"].value_counts().items()},
            "failed_calls": int(trace["n_failed_calls"].sum()),
            "failure_kinds": {str(k): int(v) for k, v in
                              trace.loc[trace["status"] != "ok", "error_kind"].value_counts().items()},
            "fallbacks": {str(k): int(v) for k, v in fallbacks.items()},
            "repaired": {k: int(trace[k].sum()) for k in _REPAIRS if k in trace},
            **({"split_batches": int(trace["n_split_batches"].sum())}
               if "n_split_batches" in trace else {}),
            "llm_calls_per_question": round(float(trace["llm_calls"].mean()) if len(trace) else 0.0, 3),
            "latency_compute": latency(results, "compute"),
            "latency_encode": latency(results, "encode")}


def _encoder(embed: EmbedParams, orch: OrchestrationParams) -> Any:
    return lambda texts, label: encode_all(list(texts), embed, orch, label)


def build_retriever(paths: DatasetPaths, params: GraphParams, method: str, embed: EmbedParams,
                    orch: OrchestrationParams, client: LLMClient | None) -> tuple[Any, dict[str, Any]]:
    """The method's index and retriever, and the index statistics."""
    corpus = read_parquet(paths.corpus)
    encode_text = get_embedder(embed).encode
    if method == "proprag":
        tables = (read_parquet(paths.index_file(f"{n}.parquet"))
                  for n in ("propositions", "entities", "incidence"))
        index = build_prop_index(corpus, *tables, _encoder(embed, orch), params)
        stats = {**index.graph.statistics(), "propositions": len(index.texts)}
        return PropRAGRetriever(index, params, encode_text), stats
    hippo = build_hippo_index(corpus, read_parquet(paths.index_file("triples.parquet")),
                              _encoder(embed, orch), params)
    stats = {**hippo.graph.statistics(), "facts": len(hippo.facts.facts)}
    llm = GraphLLM(client) if client is not None else None
    if method == "catrag":
        return CatRAGRetriever(hippo, params, llm, encode_text), stats
    return HippoRAG2Retriever(hippo, params, llm), stats


@flow(name="graph-retrieve", log_prints=True)
def retrieval_flow(paths: DatasetPaths, params: GraphParams, method: str, llm: LLMParams,
                   embed: EmbedParams, orch: OrchestrationParams, stage: str) -> RetrievalOutput:
    """Index, then one task per question (module docstring)."""
    client = stage_client(llm, stage) if uses_llm(method, params) else None
    retriever, stats = build_retriever(paths, params, method, embed, orch, client)
    questions = read_parquet(paths.questions)
    Q = encode_all(questions["question"].tolist(), embed, orch, "questions")
    results = retrieve_questions(retriever, questions["question_id"], questions["question"], orch,
                                 method, [(h_q,) for h_q in Q])
    run = run_table([r for res in results for r in res.rows])
    trace = pd.DataFrame([res.trace for res in results])
    summary = {"method": method, **retrieval_summary(trace, results), "index": stats,
               "llm_usage": client.usage.as_dict() if client else {"calls": 0}}
    return RetrievalOutput(run, trace, summary)


def run_retrieval(*args: Any, orch: OrchestrationParams, **kwargs: Any) -> RetrievalOutput:
    """:func:`retrieval_flow` on the task runner selected by ``orchestration``."""
    return with_runner(retrieval_flow, orch)(*args, orch=orch, **kwargs)


def run_method(paths: DatasetPaths, method: str, variant: str, params: Params,
               stage: str) -> RetrievalOutput:
    """``stages.retrieve_method`` entry: graph retriever ``method`` with ``params``."""
    if method not in METHODS:
        raise ParamsError(f"--method {method!r}: known graph methods are {list(METHODS)}")
    return run_retrieval(paths, params.graph, method, params.llm, params.embed,
                         orch=params.orchestration, stage=stage)
