"""The graph retrievers' index flow: the shared OpenIE index (per passage). Retrieval is the one
per-question flow of every method (:mod:`flows.method`).

Extraction (``graph.openie``): ``llm`` runs HippoRAG's NER + triple extraction as one Prefect
task per passage with shard checkpoints under ``$EVICHAIN_CHECKPOINT_DIR`` (a shard's file is
keyed by model, sampling, prompt versions and the passages' texts; passages already ``ok`` in
it are not called again) on top of the LLM cache, like ``extract_propositions``;
``propositions`` builds the triples from the EviReform index without an LLM.

Flows take paths and params, never tables (Prefect stores flow parameters).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from evichain.checkpoint import checkpoint_root, read_shard, write_shard
from evichain.config import LLMParams, OrchestrationParams
from evichain.io import read_table
from evichain.llm import LLMClient
from evichain.methods.graph.openie import (PROMPT_KEYS, PassageTriples, llm_triples,
                                           openie_summary, proposition_triples, triple_tables)
from evichain.methods.graph.params import GraphParams
from evichain.paths import DatasetPaths
from flows.common import Progress, shards, with_runner


# =========================================================================== extraction
@dataclass
class TriplesOutput:
    """The triple and status tables (polars; :func:`triple_tables`) and the stage summary."""

    triples: pl.DataFrame
    status: pl.DataFrame
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
    progress = Progress(len(rows), "OpenIE (passages)", unit="passage")
    if resumed:
        progress.resume(resumed)
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
    corpus = read_table(paths.corpus, columns=["passage_id", "title", "text"])
    summary: dict[str, Any] = {}
    if openie == "propositions":
        outcomes = proposition_triples(corpus, *(read_table(paths.index_file(f"{n}.parquet"))
                                                 for n in ("propositions", "entities", "incidence")))
        summary["llm_usage"] = {"calls": 0}
    else:
        rows = [(pid, params.passage_format.format(title=t, text=x))
                for pid, t, x in corpus.iter_rows()]
        client = LLMClient(llm, stage="extract_triples")
        outcomes, summary["resumed_passages"] = _llm_openie(rows, params.openie_checkpoint_shard,
                                                            client, root or checkpoint_root())
        summary["llm_usage"] = client.usage.as_dict()
    triples, status = triple_tables(outcomes)
    summary.update(openie_summary(status, triples.height, openie))
    return TriplesOutput(triples, status, summary)


def run_extraction(*args: Any, orch: OrchestrationParams, **kwargs: Any) -> TriplesOutput:
    """:func:`extraction_flow` on the task runner selected by ``orchestration``."""
    return with_runner(extraction_flow, orch)(*args, orch=orch, **kwargs)
