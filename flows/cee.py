"""CEE's index flow: offline facet generation (one task per passage). Retrieval is the one
per-question flow of every method (:mod:`flows.method`); the facet bank is built there by
:meth:`evichain.methods.cee.method.CEE.index` (from ``facets.parquet``, or, for ``cee.facets.source:
sentences``, the LLM-free sentence facets).

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

Flows take a :class:`~evichain.paths.DatasetPaths`, never tables: Prefect stores flow parameters in its API
(at most 512 KB).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture

from evichain.checkpoint import checkpoint_root
from evichain.config import EmbedParams, LLMParams, OrchestrationParams
from evichain.io import read_table
from evichain.llm import LLMClient
from evichain.llm.types import Prompt
from evichain.methods.cee.facets import (FacetPair, PairOutcome, Passage, load_passages,
                                         estimate_cost, facet_summary, facet_table,
                                         generate_pair_facets, load_shard, nearest_neighbours,
                                         pair_cached, pair_plan, save_shard, select_targets,
                                         shard_key, status_table)
from evichain.methods.cee.params import CEEParams, FacetParams
from evichain.methods.cee.prompts import facet_prompt
from evichain.paths import DatasetPaths
from evichain.retrieval.run import format_passages
from flows.common import Progress, shards, with_runner
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
    """The facet and status tables (polars) and the stage summary."""

    facets: pl.DataFrame
    status: pl.DataFrame
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
    progress = Progress(len(plan), "facet passages", unit="passage")
    progress.resume(sum(len(s.targets) - len(s.todo) for s in shard_plan))
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
    corpus = read_table(paths.corpus, columns=["passage_id", "title", "text"])
    passages = load_passages(corpus)
    pids = [p.passage_id for p in passages]
    E = encode_all(format_passages(corpus, params.passage_format), embed, orch, "passages")
    Q = None
    if params.facets.facet_scope == "reachable":
        Q = encode_all(read_table(paths.questions, columns=["question"])["question"].to_list(),
                       embed, orch, "questions")
    targets = select_targets(params.facets, E, Q)
    idx, sims = nearest_neighbours(E, targets, params.facets.n_neighbours)
    plan = pair_plan(pids, targets, idx, sims, params.facets.max_pairs_per_passage)
    client = LLMClient(llm, stage=stage)
    outcomes, info = run_pairs(plan, {p.passage_id: p for p in passages}, params.facets, client,
                               root or checkpoint_root())
    facets, status = facet_table(outcomes, pids), status_table(outcomes, pids)
    encode_all(facets["facet_query"].to_list(), embed, orch, "facets")
    summary = {"facet_scope": params.facets.facet_scope, **facet_summary(status, facets, len(pids)),
               **info, "llm_usage": client.usage.as_dict()}
    return FacetOutput(facets, status, summary)


def run_facets(*args: Any, orch: OrchestrationParams, **kwargs: Any) -> FacetOutput:
    """:func:`facets_flow` on the task runner selected by ``orchestration``."""
    return with_runner(facets_flow, orch)(*args, orch=orch, **kwargs)
