"""CEE flows: offline facet generation (one task per passage) and online retrieval (one task per
question).

Facets: passages (and, for ``facet_scope: reachable``, questions) are encoded through the
embedding service; targets and their neighbour pairs are planned; then one Prefect task per
target passage runs its pairs through the LLM client (concurrency bounded by
``orchestration.max_workers`` and ``llm.concurrency``), with progress per passage. Targets are
grouped in shards of ``cee.facets.checkpoint_shard``; a finished shard is written to
``$EVICHAIN_CHECKPOINT_DIR`` (default ``<user cache>/evichain/checkpoints``) under a key hashing
(model, sampling, prompt name@version and text, caps, pair ids, passage text hashes). DVC deletes
stage outputs before a re-run, so an interrupted run resumes from these checkpoints plus the LLM
cache: finished pairs are never called again, failed pairs are tried again. Before the first
call the flow logs and prints the token (and, for a priced hosted model, USD) estimate of the
pairs still to call. Facet texts are then encoded (embedding cache) for retrieval.

Retrieval: passages, facets and questions are encoded (cached), the facet bank is built once,
and each question is one task. The facet bank comes from ``facets.parquet`` (``cee.facets.source:
llm``, the paper) or, for ``source: sentences`` (variant ``robust``), is built here without any
LLM call and without ``facets.parquet``: every passage's sentences are encoded (embedding cache)
and the M least neighbour-like kept (:func:`~evichain.methods.cee.facets.sentence_facets`); the
stage summary then holds ``facets`` (source, passages with facets, counts). Flows take a
:class:`~evichain.paths.DatasetPaths`, never tables: Prefect stores flow parameters in its API
(at most 512 KB).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture

from evichain.checkpoint import checkpoint_root
from evichain.config import EmbedParams, LLMParams, OrchestrationParams, Params
from evichain.embed import get_embedder
from evichain.io import read_parquet
from evichain.llm import LLMClient
from evichain.llm.types import Prompt
from evichain.methods.cee.explore import ExploreLLM
from evichain.methods.cee.facets import (FacetPair, PairOutcome, Passage, load_passages,
                                         estimate_cost, facet_summary, facet_table,
                                         generate_pair_facets, load_shard, nearest_neighbours,
                                         pair_cached, pair_plan, save_shard, select_targets,
                                         sentence_facets, shard_key, status_table)
from evichain.methods.cee.params import CEEParams, FacetParams, variant_params
from evichain.methods.cee.prompts import facet_prompt
from evichain.methods.cee.retrieve import CEERetriever, QuestionResult
from evichain.methods.cee.scoring import FacetBank
from evichain.paths import DatasetPaths
from evichain.retrieval.run import format_passages, run_table
from flows.common import Progress, shards, with_runner
from flows.questions import retrieve_questions
from flows.retrieve import encode_all


def facets_path(paths: DatasetPaths) -> Path:
    """``artifacts/<ds>/facets.parquet`` (DESIGN §2)."""
    return paths.dir / "facets.parquet"


def facet_status_path(paths: DatasetPaths) -> Path:
    """``artifacts/<ds>/facet_status.parquet``: one status row per (target, neighbour) pair."""
    return paths.dir / "facet_status.parquet"


# =========================================================================== facets
@dataclass
class FacetOutput:
    """The facet and status tables and the stage summary."""

    facets: pd.DataFrame
    status: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)


@task(cache_policy=NO_CACHE, task_run_name="facets-{passage_id}")
def facet_passage(client: LLMClient, passage_id: str, pairs: list[FacetPair],
                  texts: dict[str, Passage], params: FacetParams,
                  prompt: Prompt[Any]) -> list[PairOutcome]:
    """The pairs of one target passage, in neighbour order (never raises: failures are rows)."""
    return [generate_pair_facets(client, p, texts[p.target], texts[p.neighbour], params, prompt)
            for p in pairs]


@dataclass
class _Shard:
    path: Path
    targets: list[str]
    done: dict[tuple[str, str], PairOutcome]
    todo: dict[str, list[FacetPair]]


def _plan_shards(plan: dict[str, list[FacetPair]], by_id: dict[str, Passage], params: FacetParams,
                 client: LLMClient, prompt: Prompt[Any], root: Path) -> list[_Shard]:
    """Shards of targets with their checkpointed (ok) pairs and the pairs still to call."""
    out = []
    for chunk in shards(list(plan), params.checkpoint_shard):
        pairs = [p for t in chunk for p in plan[t]]
        path = root / f"cee-facets-{shard_key(client, prompt, params, pairs, by_id)}.json"
        done = {k: o for k, o in load_shard(path).items() if o.ok}
        todo = {t: [p for p in plan[t] if (p.target, p.neighbour) not in done] for t in chunk}
        out.append(_Shard(path, list(chunk), done, {t: v for t, v in todo.items() if v}))
    return out


def _announce(shard_plan: Sequence[_Shard], by_id: dict[str, Passage], params: FacetParams,
              client: LLMClient, prompt: Prompt[Any]) -> dict[str, Any]:
    """Log and print the estimate of the pairs still to call, before any call."""
    pending = [p for s in shard_plan for v in s.todo.values() for p in v]
    resumed = sum(len(s.done) for s in shard_plan)
    calls = [p for p in pending
             if not pair_cached(client, prompt, by_id[p.target], by_id[p.neighbour], params)]
    est = estimate_cost(client.params.model, calls, by_id, params, prompt)
    line = (f"{est.line()} ({resumed} pairs resumed from checkpoints, "
            f"{len(pending) - len(calls)} answered from the LLM cache)")
    get_run_logger().info("estimate: %s", line)
    sys.stdout.write(f"[generate_facets] estimate: {line}\n")  # on stdout too, before any call
    sys.stdout.flush()
    return {"pending_pairs": len(pending), "estimated_calls": est.pairs, "resumed_pairs": resumed,
            "estimated_prompt_tokens": est.prompt_tokens,
            "estimated_completion_tokens": est.completion_tokens, "estimated_usd": est.usd}


def _texts_for(pairs: Sequence[FacetPair], by_id: dict[str, Passage]) -> dict[str, Passage]:
    ids = {p.target for p in pairs} | {p.neighbour for p in pairs}
    return {i: by_id[i] for i in sorted(ids)}


def run_pairs(plan: dict[str, list[FacetPair]], by_id: dict[str, Passage], params: FacetParams,
              client: LLMClient, root: Path) -> tuple[list[PairOutcome], dict[str, Any]]:
    """Every planned pair through the LLM (one task per target), with shard checkpoints."""
    prompt = facet_prompt(params.max_facets_per_pair)
    shard_plan = _plan_shards(plan, by_id, params, client, prompt, root)
    info = _announce(shard_plan, by_id, params, client, prompt)
    submitted: list[dict[str, PrefectFuture[list[PairOutcome]]]] = [
        {t: facet_passage.submit(client, t, pairs, _texts_for(pairs, by_id), params, prompt)
         for t, pairs in s.todo.items()} for s in shard_plan]
    progress = Progress(len(plan), "facet passages")
    progress.advance(sum(len(s.targets) - len(s.todo) for s in shard_plan))
    outcomes: list[PairOutcome] = []
    for s, futures in zip(shard_plan, submitted):
        for fut in futures.values():
            s.done.update({(o.status["passage_id"], o.status["neighbour_id"]): o for o in fut.result()})
            progress.advance()
        ordered = [s.done[(p.target, p.neighbour)] for t in s.targets for p in plan[t]]
        save_shard(s.path, ordered)
        outcomes += ordered
    return outcomes, info


@flow(name="cee-facets", log_prints=True)
def facets_flow(paths: DatasetPaths, params: CEEParams, llm: LLMParams, embed: EmbedParams,
                orch: OrchestrationParams, root: Path | None = None,
                stage: str = "generate_facets") -> FacetOutput:
    """C_i for the target passages of ``paths.corpus`` (module docstring)."""
    corpus = read_parquet(paths.corpus)
    passages = load_passages(corpus)
    pids = [p.passage_id for p in passages]
    E = encode_all(format_passages(corpus, params.passage_format), embed, orch, "passages")
    Q = None
    if params.facets.facet_scope == "reachable":
        Q = encode_all(read_parquet(paths.questions)["question"].tolist(), embed, orch, "questions")
    targets = select_targets(params.facets, E, Q)
    idx, sims = nearest_neighbours(E, targets, params.facets.n_neighbours)
    plan = pair_plan(pids, targets, idx, sims, params.facets.max_pairs_per_passage)
    client = LLMClient(llm, stage=stage)
    outcomes, info = run_pairs(plan, {p.passage_id: p for p in passages}, params.facets, client,
                               root or checkpoint_root())
    facets, status = facet_table(outcomes, pids), status_table(outcomes, pids)
    encode_all(facets["facet_query"].tolist(), embed, orch, "facets")
    summary = {"facet_scope": params.facets.facet_scope, **facet_summary(status, facets, len(pids)),
               **info, "llm_usage": client.usage.as_dict()}
    return FacetOutput(facets, status, summary)


# =========================================================================== retrieval
@dataclass
class RetrievalOutput:
    """Run, trace and the stage summary (exploration counts, latency, LLM usage)."""

    run: pd.DataFrame
    trace: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)


def facet_bank(facets: pd.DataFrame, pids: Sequence[str], embed: EmbedParams,
               orch: OrchestrationParams) -> FacetBank:
    """Facet embeddings (embedding service) grouped by passage row."""
    row = {pid: i for i, pid in enumerate(pids)}
    unknown = sorted(set(facets["passage_id"]) - set(row))
    if unknown:
        raise ValueError(f"facets.parquet has {len(unknown)} passage ids not in the corpus "
                         f"(e.g. {unknown[0]}): re-run generate_facets")
    vectors = encode_all(facets["facet_query"].tolist(), embed, orch, "facets")
    return FacetBank.build([row[p] for p in facets["passage_id"]], vectors, len(pids))


def sentence_facet_bank(passages: Sequence[Passage], E: np.ndarray, params: FacetParams,
                        embed: EmbedParams, orch: OrchestrationParams) -> tuple[FacetBank, dict[str, Any]]:
    """LLM-free sentence facets for every passage (``cee.facets.source: sentences``): the
    bank and its counts (``source``, ``passages_with_facets``, …) for the stage summary."""
    logger = get_run_logger()
    built = sentence_facets(passages, E, params.n_neighbours, params.sentence_facets,
                            lambda texts: encode_all(texts, embed, orch, "sentence facets"),
                            log=logger.info)
    vectors = built.vectors if built.texts else np.zeros((0, E.shape[1]))
    return FacetBank.build(built.owner.tolist(), vectors, len(passages)), built.info


def _latency(results: Sequence[QuestionResult], key: str) -> dict[str, float]:
    ms = np.array([r.seconds[key] * 1000.0 for r in results]) if results else np.zeros(1)
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3),
            "p95_ms": round(float(np.percentile(ms, 95)), 3), "mean_ms": round(float(ms.mean()), 3)}


def retrieval_summary(trace: pd.DataFrame, results: Sequence[QuestionResult]) -> dict[str, Any]:
    """Exploration counts and latency (compute = Eq. 2–8, excluding LLM calls and encoding)."""
    return {"questions": len(trace),
            "stop_reasons": {str(k): int(v) for k, v in trace["stop_reason"].value_counts().items()},
            "mean_rounds": round(float(trace["rounds_run"].mean()), 3) if len(trace) else 0.0,
            "mean_probes": round(float(trace["probes"].map(len).mean()), 3) if len(trace) else 0.0,
            "mean_pool_size": round(float(trace["pool_size"].mean()), 3) if len(trace) else 0.0,
            "gold_in_pool": int(trace["gold_in_pool"].sum()), "gold": int(trace["n_gold"].sum()),
            "llm_failures": int(trace["llm_failures"].map(len).sum()),
            "latency_compute": _latency(results, "compute"),
            "latency_encode": _latency(results, "encode"), "latency_llm": _latency(results, "llm")}


@flow(name="cee-retrieve", log_prints=True)
def retrieval_flow(paths: DatasetPaths, params: CEEParams, llm: LLMParams, embed: EmbedParams,
                   orch: OrchestrationParams, stage: str = "retrieve_cee") -> RetrievalOutput:
    """Encode, build the facet bank, then one task per question (module docstring)."""
    corpus, questions = read_parquet(paths.corpus), read_parquet(paths.questions)
    passages = load_passages(corpus)
    E = encode_all(format_passages(corpus, params.passage_format), embed, orch, "passages")
    facet_info: dict[str, Any] | None = None
    if params.facets.source == "sentences":
        bank, facet_info = sentence_facet_bank(passages, E, params.facets, embed, orch)
    else:
        bank = facet_bank(read_parquet(facets_path(paths)), [p.passage_id for p in passages],
                          embed, orch)
    encode_all(questions["question"].tolist(), embed, orch, "questions")
    client = LLMClient(llm, stage=stage)
    retriever = CEERetriever(E, passages, bank, params, ExploreLLM(client, params),
                             get_embedder(embed).encode)
    # exploration, refinement and selection per question
    results = retrieve_questions(retriever, questions["question_id"], questions["question"], orch,
                                 "cee", [([str(g) for g in gold],)
                                         for gold in questions["gold_passage_ids"]])
    run = run_table([r for res in results for r in res.rows])
    trace = pd.DataFrame([res.trace for res in results])
    summary = retrieval_summary(trace, results)
    if facet_info is not None:
        summary["facets"] = facet_info
    if params.bridge_expansion:
        summary["bridge_added"] = int(trace["bridge_added"].sum()) if len(trace) else 0
        summary["mean_bridge_added"] = (round(float(trace["bridge_added"].mean()), 3)
                                        if len(trace) else 0.0)
    summary["llm_usage"] = client.usage.as_dict()
    return RetrievalOutput(run, trace, summary)


def run_facets(*args: Any, orch: OrchestrationParams, **kwargs: Any) -> FacetOutput:
    """:func:`facets_flow` on the task runner selected by ``orchestration``."""
    return with_runner(facets_flow, orch)(*args, orch=orch, **kwargs)


def run_retrieval(*args: Any, orch: OrchestrationParams, **kwargs: Any) -> RetrievalOutput:
    """:func:`retrieval_flow` on the task runner selected by ``orchestration``."""
    return with_runner(retrieval_flow, orch)(*args, orch=orch, **kwargs)


def run_method(paths: DatasetPaths, method: str, variant: str, params: Params,
               stage: str) -> RetrievalOutput:
    """``stages.retrieve_method`` entry: CEE ``variant`` (see
    :data:`evichain.methods.cee.params.VARIANTS`) with ``params``."""
    return run_retrieval(paths, variant_params(params.cee, variant), params.llm, params.embed,
                         orch=params.orchestration, stage=stage)
