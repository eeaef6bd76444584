"""Query expansion flow (HyDE, query2doc, LameR): one task per question.

The flow builds only the retrievers the method queries (BM25 index; passage vectors through
the embedding service, cached), creates the method's per-sample LLM clients in the flow thread
first (one client per sample seed, see :mod:`evichain.methods.expansion.generate`), then runs
one Prefect task per question with progress. The stage summary sums the usage of the sample
clients. Flow parameters are paths and params, never tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from prefect import flow

from evichain.config import EmbedParams, LLMParams, OrchestrationParams, Params, RetrievalParams
from evichain.embed import get_embedder
from evichain.io import read_parquet
from evichain.llm import LLMClient, Usage
from evichain.methods.base import Outcome
from evichain.methods.expansion.generate import sample_params
from evichain.methods.expansion.hyde import HyDE
from evichain.methods.expansion.lamer import LameR
from evichain.methods.expansion.params import ExpansionParams, check_method, retrievers_of, sampling_of
from evichain.methods.expansion.query2doc import Query2Doc
from evichain.methods.expansion.search import CorpusSearch
from evichain.paths import DatasetPaths
from evichain.retrieval.bm25 import BM25Index
from evichain.retrieval.run import format_passages, run_table
from flows.common import with_runner
from flows.questions import retrieve_questions
from flows.read import stage_client
from flows.retrieve import encode_all

Expander = HyDE | Query2Doc | LameR


@dataclass
class ExpansionOutput:
    """Run, trace (one row per question) and the stage summary."""

    run: pd.DataFrame
    trace: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)


def build_search(corpus: pd.DataFrame, method: str, params: ExpansionParams,
                 retrieval: RetrievalParams, embed: EmbedParams, orch: OrchestrationParams) -> CorpusSearch:
    """The corpus retrievers ``method`` queries."""
    use_bm25, use_dense = retrievers_of(method, params)
    bm25 = BM25Index(corpus, retrieval.bm25) if use_bm25 else None
    vectors = (encode_all(format_passages(corpus, retrieval.dense.passage_format), embed, orch,
                          "passages") if use_dense else None)
    return CorpusSearch(corpus["passage_id"].astype(str).tolist(), bm25, vectors,
                        get_embedder(embed).encode if use_dense else None)


def make_expander(method: str, clients: Sequence[LLMClient], search: CorpusSearch,
                  params: ExpansionParams, corpus: pd.DataFrame) -> Expander:
    """The method object of ``method``."""
    if method == "hyde":
        return HyDE(clients, search, params)
    if method == "query2doc":
        return Query2Doc(clients, search, params)
    return LameR(clients, search, params, corpus.set_index("passage_id"))


def summed_usage(clients: Sequence[LLMClient]) -> dict[str, float | int]:
    """Usage of the distinct sample clients, summed."""
    total = Usage()
    for client in {id(c): c for c in clients}.values():
        total.add(client.usage)
    return total.as_dict()


def expansion_summary(trace: pd.DataFrame, method: str, temperature: float,
                      seeds: list[int | None]) -> dict[str, Any]:
    """Counts for the usage JSON: statuses, fallbacks, failed generations, tokens."""
    failed = [k for kinds in trace["error_kinds"] for k in kinds]
    return {"method": method, "questions": len(trace),
            "status": {str(k): int(v) for k, v in trace["status"].value_counts().items()},
            "fallbacks": int(trace["fallback"].sum()),
            "no_rows": int(((trace["status"] == "failed") & ~trace["fallback"]).sum()),
            "generations_requested": int(trace["n_requested"].sum()),
            "generations_ok": int(trace["n_generated"].sum()),
            "generations_failed": int(trace["n_failed"].sum()),
            "failure_kinds": {k: failed.count(k) for k in sorted(set(failed))},
            "prompt_tokens": int(trace["prompt_tokens"].sum()),
            "completion_tokens": int(trace["completion_tokens"].sum()),
            "sampling": {"temperature": temperature, "seeds": seeds,
                         "cache_keys": "one per sample: seed = (llm.seed or 0) + sample index"}}


@flow(name="expansion", log_prints=True)
def expansion_flow(paths: DatasetPaths, method: str, params: ExpansionParams,
                   retrieval: RetrievalParams, llm: LLMParams, embed: EmbedParams,
                   orch: OrchestrationParams, stage: str = "retrieve_expansion") -> ExpansionOutput:
    """Retrievers, sample clients, then one task per question (module docstring)."""
    check_method(method)
    temperature, n = sampling_of(method, params)
    clients = [stage_client(p, stage) for p in sample_params(llm, temperature, n)]
    corpus, questions = read_parquet(paths.corpus), read_parquet(paths.questions)
    search = build_search(corpus, method, params, retrieval, embed, orch)
    expander = make_expander(method, clients, search, params, corpus)
    # generate, expand and retrieve per question
    results: list[Outcome] = retrieve_questions(expander, questions["question_id"].astype(str),
                                                questions["question"], orch, method)
    run = run_table([row for r in results for row in r.rows])
    trace = pd.DataFrame([r.trace for r in results])
    summary = expansion_summary(trace, method, temperature, [c.params.seed for c in clients])
    summary["llm_usage"] = summed_usage(clients)
    return ExpansionOutput(run, trace, summary)


def run_expansion(*args: Any, orch: OrchestrationParams, **kwargs: Any) -> ExpansionOutput:
    """:func:`expansion_flow` on the task runner selected by ``orchestration``."""
    return with_runner(expansion_flow, orch)(*args, orch=orch, **kwargs)


def run_method(paths: DatasetPaths, method: str, variant: str, params: Params,
               stage: str) -> ExpansionOutput:
    """``stages.retrieve_method`` entry: expansion ``method`` with ``params``."""
    return run_expansion(paths, check_method(method), params.expansion, params.retrieval,
                         params.llm, params.embed, orch=params.orchestration, stage=stage)
