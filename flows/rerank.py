"""Reranker flow: the dense pool of every question, then one task per question.

Pools (:mod:`evichain.methods.rerank.pool`): the first ``rerank.pool_size`` passages of the dense
run, recomputed to that depth with the dense stage's encoder and passage format when the dense
run is shallower (its default depth is 20 < 40). Rerankers: ``listwise`` (Listing 14 through the
stage's LLM client, created in the flow thread first) or ``cross_encoder`` (a local
sentence-transformers CrossEncoder, loaded once before any task; missing weights stop the flow
with :class:`~evichain.methods.rerank.cross_encoder.CrossEncoderWeightsMissing`).

The flow takes paths and params, never tables (Prefect stores flow parameters).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pandas as pd
from prefect import flow

from evichain.config import DenseParams, EmbedParams, LLMParams, OrchestrationParams, Params
from evichain.io import read_parquet
from evichain.methods.rerank.apply import Reranker, Row, rerank_pool
from evichain.methods.rerank.cross_encoder import CrossEncoderReranker, load_cross_encoder
from evichain.methods.rerank.listwise import ListwiseReranker
from evichain.methods.rerank.params import RerankParams
from evichain.methods.rerank.pool import needs_deeper_pool, pool_of, prefix_mismatches, ranked_ids
from evichain.paths import DatasetPaths
from evichain.retrieval.run import format_passages, run_from_scores, run_table
from flows.common import with_runner
from flows.questions import QuestionFn, retrieve_questions
from flows.read import stage_client
from flows.retrieve import encode_all


@dataclass
class RerankOutput:
    """Run, trace (one row per question) and the stage summary."""

    run: pd.DataFrame
    trace: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass
class Pools:
    """Per question: the ranking the pool is cut from and the dense run's ids below the pool."""

    ranking: dict[str, list[tuple[str, float]]]
    tail: dict[str, list[str]]
    source: str
    prefix_mismatches: int


def load_pools(paths: DatasetPaths, pool_size: int, dense: DenseParams, embed: EmbedParams,
               orch: OrchestrationParams) -> Pools:
    """The dense pools (module docstring); the deep ranking is computed exactly as the dense
    stage computes its run (all questions × all passages, same tie rule)."""
    corpus, questions = read_parquet(paths.corpus), read_parquet(paths.questions)
    run = read_parquet(paths.run("dense"))
    qids = [str(q) for q in questions["question_id"]]
    shallow = ranked_ids(run)
    deep, source, bad = shallow, "dense_run", 0
    if needs_deeper_pool(run, qids, pool_size, len(corpus)):
        P = encode_all(format_passages(corpus, dense.passage_format), embed, orch, "passages")
        Q = encode_all(questions["question"].tolist(), embed, orch, "questions")
        deep = ranked_ids(run_from_scores(qids, Q @ P.T, corpus["passage_id"].tolist(), pool_size))
        source, bad = "recomputed", prefix_mismatches(deep, shallow)
    tail = {q: [p for p, _ in shallow.get(q, [])[pool_size:]] for q in qids}
    return Pools(deep, tail, source, bad)


def rerank_summary(trace: pd.DataFrame, pools: Pools, method: str) -> dict[str, Any]:
    """Counts for the usage JSON (statuses, fallbacks, repairs, pool coverage)."""
    out: dict[str, Any] = {
        "method": method, "questions": len(trace), "pool_source": pools.source,
        "pool_prefix_mismatches": pools.prefix_mismatches,
        "status": {str(k): int(v) for k, v in trace["status"].value_counts().items()},
        "fallbacks": int(trace["fallback"].sum()),
        "gold_in_pool": int(trace["gold_in_pool"].sum()), "gold": int(trace["n_gold"].sum()),
        "prompt_tokens": int(trace["prompt_tokens"].sum()),
        "completion_tokens": int(trace["completion_tokens"].sum())}
    for kind in ("coerced", "unknown", "duplicate", "missing"):
        col = f"n_{kind}_ids"
        if col in trace:
            out[f"repaired_{kind}_ids"] = int(trace[col].sum())
    if "error_kind" in trace:
        failed = trace[trace["status"] == "failed"]
        out["failure_kinds"] = {str(k): int(v) for k, v in failed["error_kind"].value_counts().items()}
    return out


def make_reranker(method: str, params: RerankParams, llm: LLMParams, stage: str) -> Reranker:
    """The reranker of ``method`` (created in the flow thread)."""
    if method == "listwise":
        return ListwiseReranker(stage_client(llm, stage), params.listwise)
    if method == "cross_encoder":
        return CrossEncoderReranker(load_cross_encoder(params.cross_encoder), params.cross_encoder)
    raise ValueError(f"unknown reranker '{method}' (known: listwise, cross_encoder)")


@flow(name="rerank", log_prints=True)
def rerank_flow(paths: DatasetPaths, method: str, params: RerankParams, dense: DenseParams,
                embed: EmbedParams, llm: LLMParams, orch: OrchestrationParams,
                stage: str = "retrieve_rerank") -> RerankOutput:
    """Pools, then one rerank task per question (module docstring)."""
    reranker = make_reranker(method, params, llm, stage)
    pools = load_pools(paths, params.pool_size, dense, embed, orch)
    corpus = read_parquet(paths.corpus).set_index("passage_id")
    questions = read_parquet(paths.questions)
    qids = questions["question_id"].astype(str).tolist()
    pools_in = [(pool_of(pools.ranking.get(qid, []), params.pool_size, corpus),
                 pools.tail.get(qid, []), [str(g) for g in gold])
                for qid, gold in zip(qids, questions["gold_passage_ids"])]
    # rerank one pool per question: its run rows and trace row
    results: Sequence[tuple[list[Row], dict[str, Any]]] = retrieve_questions(
        QuestionFn(partial(rerank_pool, reranker)), qids, questions["question"], orch,
        f"rerank-{method}", pools_in)
    run = run_table([row for rows, _ in results for row in rows])
    trace = pd.DataFrame([t for _, t in results])
    summary = rerank_summary(trace, pools, method)
    summary["llm_usage"] = (stage_client(llm, stage).usage.as_dict() if method == "listwise"
                            else {"calls": 0})
    return RerankOutput(run, trace, summary)


def run_rerank(*args: Any, orch: OrchestrationParams, **kwargs: Any) -> RerankOutput:
    """:func:`rerank_flow` on the task runner selected by ``orchestration``."""
    return with_runner(rerank_flow, orch)(*args, orch=orch, **kwargs)


def run_method(paths: DatasetPaths, method: str, variant: str, params: Params,
               stage: str) -> RerankOutput:
    """``stages.retrieve_method`` entry: reranker ``method`` with ``params``."""
    return run_rerank(paths, method, params.rerank, params.retrieval.dense, params.embed,
                      params.llm, orch=params.orchestration, stage=stage)
