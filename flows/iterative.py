"""Iterative baselines flow (IRCoT, Self-Ask, S2G-RAG, GeAR): one Prefect task per question.

The flow reads the corpus and questions (and, for GeAR, the EviReform index tables), encodes
passages (and propositions) through the cached embedding service once, creates the stage's
LLM client in the flow's own thread (so a bundled local model server is tied to this process),
then runs each question as a task through the one client. Flow parameters are paths and params,
never tables (Prefect stores flow parameters).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from prefect import flow

from evichain.config import BM25Params, EmbedParams, LLMParams, OrchestrationParams, Params
from evichain.embed import get_embedder
from evichain.io import read_parquet
from evichain.llm import LLMClient
from evichain.methods.expansion.generate import question_sequence
from evichain.methods.iterative.common import (EVIDENCE_COLUMNS, BM25Searcher, DenseSearcher,
                                               Outcome, Passages, Searcher, summarize)
from evichain.methods.iterative.gear_graph import EntityGraph
from evichain.methods.iterative.params import METHODS, IterativeParams
from evichain.methods.iterative.registry import IterativeMethod, build_method
from evichain.paths import DatasetPaths
from evichain.retrieval.bm25 import BM25Index
from evichain.retrieval.run import format_passages, run_table
from flows.common import with_runner
from flows.questions import QuestionFn, retrieve_questions
from flows.retrieve import encode_all


@dataclass
class IterativeOutput:
    """Run, trace, evidence and the stage summary of one method on one dataset."""

    run: pd.DataFrame
    trace: pd.DataFrame
    evidence: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)


def episode(method: IterativeMethod, client: LLMClient) -> QuestionFn:
    """One question's episode as a retriever (never raises for LLM failures: they are trace
    rows).

    With a single-slot model (``llm.concurrency == 1``) the episode holds the model's sequence
    lock, so its steps reach the server back to back and each step's prompt, which extends the
    previous one (IRCoT appends paragraphs and reasoning), reuses the server's cached prefix
    instead of being read again after another question's prompt. Calls and replies are unchanged.
    """
    def run(question_id: str, question: str) -> Outcome:
        with question_sequence([client]):
            return method.run(client, question_id, question)

    return QuestionFn(run)


def make_searcher(corpus: pd.DataFrame, params: IterativeParams, embed: EmbedParams,
                  bm25: BM25Params, orch: OrchestrationParams) -> Searcher:
    """The retriever every step uses: dense (project embedder) or BM25."""
    if params.retriever == "bm25":
        return BM25Searcher(BM25Index(corpus, bm25))
    vectors = encode_all(format_passages(corpus, params.passage_format), embed, orch, "passages")
    return DenseSearcher(vectors, get_embedder(embed).encode)


def load_graph(paths: DatasetPaths, corpus: pd.DataFrame, embed: EmbedParams,
               orch: OrchestrationParams) -> EntityGraph:
    """GeAR's graph from the EviReform index tables of the dataset."""
    ids = corpus["passage_id"].tolist()
    props = EntityGraph.ordered(read_parquet(paths.index_file("propositions.parquet")), ids)
    entities = read_parquet(paths.index_file("entities.parquet"))
    incidence = read_parquet(paths.index_file("incidence.parquet"))
    H = encode_all(props["text"].tolist(), embed, orch, "propositions")
    return EntityGraph.build(ids, props, entities, incidence, H)


def assemble(method: str, outcomes: list[Outcome], client: LLMClient) -> IterativeOutput:
    """Stage tables from the per-question outcomes."""
    run = run_table([row for o in outcomes for row in o.rows])
    trace = pd.DataFrame([o.trace for o in outcomes])
    evidence = pd.DataFrame([r for o in outcomes for r in o.evidence], columns=EVIDENCE_COLUMNS)
    evidence = evidence.astype({"position": "int32"})
    summary = summarize(method, trace)
    summary["llm_usage"] = client.usage.as_dict()
    return IterativeOutput(run, trace, evidence, summary)


@flow(name="iterative-retrieve", log_prints=True)
def iterative_flow(paths: DatasetPaths, method: str, params: IterativeParams, llm: LLMParams,
                   embed: EmbedParams, bm25: BM25Params, orch: OrchestrationParams,
                   stage: str = "retrieve_iterative") -> IterativeOutput:
    """Every question of ``paths.questions`` through ``method`` (module docstring)."""
    corpus, questions = read_parquet(paths.corpus), read_parquet(paths.questions)
    client = LLMClient(llm, stage=stage)  # in the flow's thread: a local server dies with us
    graph = load_graph(paths, corpus, embed, orch) if method == "gear" else None
    runner = build_method(method, params, Passages.from_corpus(corpus),
                          make_searcher(corpus, params, embed, bm25, orch),
                          get_embedder(embed).encode, graph)
    outcomes = retrieve_questions(episode(runner, client), questions["question_id"],
                                  questions["question"], orch, method)
    return assemble(method, outcomes, client)


def run_iterative(*args: Any, orch: OrchestrationParams, **kwargs: Any) -> IterativeOutput:
    """:func:`iterative_flow` on the task runner that ``orchestration`` selects."""
    return with_runner(iterative_flow, orch)(*args, orch=orch, **kwargs)


def run_method(paths: DatasetPaths, method: str, variant: str, params: Params,
               stage: str) -> IterativeOutput:
    """``stages.retrieve_method`` entry: iterative ``method`` with ``params``."""
    if method not in METHODS:
        raise ValueError(f"--method must be one of {list(METHODS)}, got {method!r}")
    return run_iterative(paths, method, params.iterative, params.llm, params.embed,
                         params.retrieval.bm25, orch=params.orchestration, stage=stage)
