"""EviReform flows: index extraction (per passage) and tuning (per configuration). Retrieval is
the one per-question flow of every method (:mod:`flows.method`).

Extraction (``extractor: llm``): one Prefect task per passage (Listing 11 through the LLM
client; concurrency bounded by ``orchestration.max_workers`` and ``llm.concurrency``), with
progress per passage. Passages are grouped in shards of ``evireform.index.checkpoint_shard``;
a finished shard is written to ``$EVICHAIN_CHECKPOINT_DIR`` (default
``<user cache>/evichain/checkpoints``) under a key hashing (model, sampling settings, prompt
name@version, the shard's passage ids and texts). DVC deletes stage outputs before a re-run,
so an interrupted run resumes from these checkpoints plus the LLM cache: finished shards are
read back, failed passages are tried again, nothing finished is called again.
``extractor: sentences`` runs in shard tasks (no LLM).

Tuning (``tune_evireform``): the method from the registry, its index built once, then one task
per configuration of the two grids of :mod:`evichain.methods.evireform.tuning`.

Flows take a :class:`~evichain.paths.DatasetPaths` and read their tables themselves:
Prefect stores flow parameters in its API (at most 512 KB), so tables are never parameters.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from evichain.checkpoint import checkpoint_root, read_shard, write_shard
from evichain.config import LLMParams, OrchestrationParams, Params
from evichain.io import read_table
from evichain.llm import LLMClient
from evichain.methods.base import BuildContext, Method, get_method
from evichain.methods.evireform.extract import (PROPOSITION_COLUMNS, STATUS_COLUMNS,
                                                PassageExtraction, TitleMatcher, llm_propositions,
                                                order_tables, sentence_extraction, with_fallback)
from evichain.methods.evireform.index import EviReformIndex
from evichain.methods.evireform.params import IndexParams
from evichain.methods.evireform.prompts import EXTRACT, LISTING_11
from evichain.methods.evireform.tuning import (HYBRID_KEYS, ROBUST_KEYS, choose, hybrid_grid,
                                               objective_value, robust_grid, with_robust)
from evichain.metrics.retrieval import per_question_metrics
from evichain.paths import DatasetPaths
from evichain.retrieval.run import run_table
from flows.common import Progress, collect, shard_size, shards, with_runner
from flows.method import StageClients, prepare


# =========================================================================== extraction
@dataclass
class ExtractionOutput:
    """The two extraction tables (polars; :func:`extraction_tables`) and the stage summary."""

    propositions: pl.DataFrame
    status: pl.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)


def shard_key(client: LLMClient, rows: Sequence[tuple[str, str, str]]) -> str:
    """Hash of (model, sampling, prompt name@version, passage ids and texts of the shard)."""
    payload = {"model": client.params.model, "sampling": client.sampling(), "prompt": EXTRACT.key,
               "passages": [(pid, hashlib.sha256(text.encode()).hexdigest()) for pid, _, text in rows]}
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _load_shard(path: Path) -> dict[str, PassageExtraction]:
    data = read_shard(path)
    if data is None:
        return {}
    return {o["status"]["passage_id"]: PassageExtraction(o["propositions"], o["status"])
            for o in data["outcomes"]}


def _save_shard(path: Path, outcomes: Sequence[PassageExtraction]) -> None:
    write_shard(path, outcomes)


@task(cache_policy=NO_CACHE, task_run_name="extract-{passage_id}")
def extract_passage(client: LLMClient, passage_id: str, text: str) -> PassageExtraction:
    """Listing 11 for one passage (never raises: failures come back as status rows)."""
    return llm_propositions(client, passage_id, text)


@task(cache_policy=NO_CACHE, task_run_name="sentences-{start}")
def sentence_shard(rows: list[tuple[str, str, str]], matcher: TitleMatcher, params: IndexParams,
                   start: int) -> list[PassageExtraction]:
    """The LLM-free extractor over one shard of passages."""
    return [sentence_extraction(pid, title, text, matcher, params) for pid, title, text in rows]


def _estimate_prompt_tokens(rows: Sequence[tuple[str, str, str]]) -> int:
    """Rough prompt-token estimate (4 characters per token) before a long LLM run."""
    return int(sum(len(LISTING_11) + len(text) + 16 for _, _, text in rows) / 4)


def _plan_shards(rows: list[tuple[str, str, str]], params: IndexParams, client: LLMClient,
                 root: Path) -> list[tuple[Path, list[tuple[str, str, str]], dict[str, PassageExtraction]]]:
    """(checkpoint path, shard rows, passages already ``ok`` in that checkpoint) per shard."""
    plan = []
    for chunk in shards(rows, params.checkpoint_shard):
        path = root / f"evireform-extract-{shard_key(client, chunk)}.json"
        done = {k: v for k, v in _load_shard(path).items() if v.status.get("status") == "ok"}
        plan.append((path, list(chunk), done))
    return plan


def _llm_extract(rows: list[tuple[str, str, str]], params: IndexParams, client: LLMClient,
                 root: Path) -> tuple[list[PassageExtraction], int]:
    """Per-passage tasks with shard checkpoints; returns outcomes and passages resumed."""
    plan = _plan_shards(rows, params, client, root)
    pending = [r for _, chunk, done in plan for r in chunk if r[0] not in done]
    resumed = len(rows) - len(pending)
    get_run_logger().info("LLM extraction: %d passages to call (%d resumed from checkpoints), "
                          "~%d prompt tokens estimated", len(pending), resumed,
                          _estimate_prompt_tokens(pending))
    futures = {r[0]: extract_passage.submit(client, r[0], r[2]) for r in pending}
    progress = Progress(len(rows), "extract propositions (passages)", unit="passage")
    if resumed:
        progress.resume(resumed)
    outcomes: list[PassageExtraction] = []
    for path, chunk, done in plan:
        for pid, _, _ in chunk:
            if pid not in done:
                done[pid] = futures[pid].result()
                progress.advance()
        shard_out = [done[r[0]] for r in chunk]
        _save_shard(path, shard_out)
        outcomes += shard_out
    return outcomes, resumed


def _sentence_extract(rows: list[tuple[str, str, str]], matcher: TitleMatcher, params: IndexParams,
                      orch: OrchestrationParams) -> list[PassageExtraction]:
    size = shard_size(len(rows), orch.max_workers, minimum=500)
    futures = [(sentence_shard.submit(list(chunk), matcher, params, s), len(chunk))
               for s, chunk in zip(range(0, len(rows), size), shards(rows, size))]
    parts = collect([f for f, _ in futures], "extract propositions (sentences)", [n for _, n in futures])
    return [extraction for part in parts for extraction in part]


def extraction_summary(status: pl.DataFrame, n_props: int, extractor: str) -> dict[str, Any]:
    """Counts for the stage summary: passages, ok = passages − failed, failed (``status ==
    "failed"``), failure_rate = failed / max(1, passages) to 4 places, passages that fell back to
    sentences, propositions, and failed passages per non-null ``error_kind``."""
    failed = status.filter(pl.col("status") == "failed")
    n = status.height
    return {"extractor": extractor, "passages": n, "ok": n - failed.height,
            "failed": failed.height, "failure_rate": round(failed.height / max(1, n), 4),
            "fallback_sentences": int((status["fallback"] == "sentences").sum()),
            "propositions": n_props,
            "failure_kinds": {str(k): int(v) for k, v in
                              failed.drop_nulls("error_kind").group_by("error_kind").len().iter_rows()}}


def extraction_tables(props: Sequence[dict[str, Any]], status: Sequence[dict[str, Any]]
                      ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The propositions and status tables of ordered rows (:func:`order_tables`), columns
    :data:`PROPOSITION_COLUMNS` / :data:`STATUS_COLUMNS`. Types are inferred from every row as
    pandas infers them (a column of empty lists only is ``List(Null)``, of ``None`` only
    ``Null``; no rows: ``Null`` columns), so the Parquet bytes are those of the pandas build."""
    return (pl.from_dicts(list(props), schema=PROPOSITION_COLUMNS, infer_schema_length=None),
            pl.from_dicts(list(status), schema=STATUS_COLUMNS, infer_schema_length=None))


@flow(name="evireform-extract", log_prints=True)
def extraction_flow(paths: DatasetPaths, params: IndexParams, llm: LLMParams,
                    orch: OrchestrationParams, root: Path | None = None) -> ExtractionOutput:
    """Propositions + status rows for every passage of ``paths.corpus`` (module docstring).

    Flows take paths, not tables: Prefect stores flow parameters (limit 512 KB)."""
    corpus = read_table(paths.corpus, columns=["passage_id", "title", "text"])
    rows = list(corpus.iter_rows())
    matcher = TitleMatcher(corpus["title"].to_list())
    summary: dict[str, Any] = {}
    if params.extractor == "sentences":
        outcomes = _sentence_extract(rows, matcher, params, orch)
    else:
        # the extraction output budget replaces llm.max_tokens (long passages, long JSON)
        client = LLMClient(llm.model_copy(update={"max_tokens": params.max_tokens}),
                           stage="extract_propositions")
        outcomes, summary["resumed_passages"] = _llm_extract(rows, params, client, root or checkpoint_root())
        titles = {pid: (title, text) for pid, title, text in rows}
        outcomes = [with_fallback(o, *titles[o.status["passage_id"]], matcher, params) for o in outcomes]
        summary["llm_usage"] = client.usage.as_dict()
    props, status = order_tables([p for o in outcomes for p in o.propositions],
                                 [o.status for o in outcomes], corpus["passage_id"].to_list())
    props_df, status_df = extraction_tables(props, status)
    summary.update(extraction_summary(status_df, props_df.height, params.extractor))
    return ExtractionOutput(props_df, status_df, summary)


# =========================================================================== tuning
@dataclass
class TuningOutput:
    """One row per configuration (its values, objective and metric means) and the choices."""

    table: pd.DataFrame
    chosen: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)


@task(cache_policy=NO_CACHE, task_run_name="tune-{variant}-{n}")
def evaluate_config(method: Method, ctx: BuildContext, index: EviReformIndex,
                    questions: pd.DataFrame, variant: str, n: int) -> pd.DataFrame:
    """Per-question metrics of one configuration: ``method`` built for ``variant`` over ``ctx``
    (whose ``evireform.robust`` block is the configuration), questions in turn (LLM answers
    from the cache)."""
    retriever = method.build(ctx, variant, index)
    rows = [r for qid, text in zip(questions["question_id"], questions["question"])
            for r in retriever.retrieve(str(qid), str(text)).rows]
    return per_question_metrics(run_table(rows), questions)


def _grid_table(futures: Sequence[Any], configs: Sequence[dict[str, Any]], variant: str,
                objective: Sequence[str]) -> pd.DataFrame:
    per_q = collect(futures, f"tune {variant} configurations")
    rows = [{"variant": variant, **cfg, "objective": objective_value(pq, objective),
             **{m: float(pq[m].mean()) for m in pq.columns if m != "question_id"}}
            for cfg, pq in zip(configs, per_q, strict=True)]
    return pd.DataFrame(rows)


@flow(name="evireform-tune", log_prints=True)
def tuning_flow(paths: DatasetPaths, params: Params, stage: str = "tune_evireform") -> TuningOutput:
    """The two grids of :mod:`evichain.methods.evireform.tuning` on ``paths``' questions: the
    method from the registry (one index, one LLM client), built once per configuration."""
    method = get_method("evireform")
    clients = StageClients(stage)
    ctx, questions, index = prepare(paths, method, "full", params, clients)
    ev = params.evireform
    objective = ev.tuning.objective

    def grid(variant: str, configs: list[dict[str, Any]]) -> pd.DataFrame:
        futures = [evaluate_config.submit(method, replace(ctx, params=params.model_copy(
                       update={"evireform": with_robust(ev, c)})), index, questions, variant, n)
                   for n, c in enumerate(configs)]
        return _grid_table(futures, configs, variant, objective)

    with method.compute_limits():
        robust = grid("robust", robust_grid(ev.tuning))
        best = choose(robust, ROBUST_KEYS)
        hybrid = grid("hybrid", hybrid_grid(ev.tuning, best))
    chosen = {**best, **choose(hybrid, HYBRID_KEYS)}
    summary = {"questions": len(questions), "objective": list(objective),
               "configurations": len(robust) + len(hybrid), "llm_usage": clients.usage()}
    return TuningOutput(pd.concat([robust, hybrid], ignore_index=True), chosen, summary)


def run_tuning(paths: DatasetPaths, params: Params, stage: str = "tune_evireform") -> TuningOutput:
    """:func:`tuning_flow` on the task runner selected by ``orchestration``."""
    return with_runner(tuning_flow, params.orchestration)(paths, params, stage)


def run_extraction(*args: Any, orch: OrchestrationParams, **kwargs: Any) -> ExtractionOutput:
    """:func:`extraction_flow` on the task runner selected by ``orchestration``."""
    return with_runner(extraction_flow, orch)(*args, orch=orch, **kwargs)
