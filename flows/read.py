"""QA reading flow: one task per question through the shared LLM client, with progress.

The flow takes artifact paths (small flow parameters); ``run_path=None`` means direct
inference without context (EviReform Listing 3).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from evichain.config import LLMParams
from evichain.io import read_table
from evichain.llm import LLMClient, Usage
from evichain.qa.reader import QA_COLUMNS, evidence_contexts, read_one, top_k_contexts
from flows.common import collect

_CLIENTS: dict[tuple[str, str], LLMClient] = {}
_CLIENTS_LOCK = threading.Lock()


def stage_client(llm: LLMParams, stage: str) -> LLMClient:
    """One client per (params, stage) per process, so usage sums over the stage's tasks."""
    key = (llm.model_dump_json(), stage)
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            _CLIENTS[key] = LLMClient(llm, stage=stage)
        return _CLIENTS[key]


@task(name="read-question", task_run_name="read-{qid}", retries=1, retry_delay_seconds=2,
      cache_policy=NO_CACHE)
def read_question(llm: LLMParams, stage: str, qid: str, question: str,
                  passages: list[dict[str, str]] | None) -> dict[str, Any]:
    """Answer one question (the client already retries transient errors itself)."""
    row = read_one(stage_client(llm, stage), question, passages)
    row["question_id"] = qid
    row["context_passage_ids"] = [p["passage_id"] for p in passages or []]
    return row


def load_contexts(corpus_path: Path, run_path: Path, k: int) -> dict[str, list[dict[str, str]]]:
    """question_id → its top-``k`` passages (id, title, text) from a run; a passage missing
    from the corpus is a ``KeyError``."""
    ids = top_k_contexts(read_table(run_path), k)
    wanted = sorted({p for pids in ids.values() for p in pids})
    corpus = read_table(corpus_path, columns=["passage_id", "title", "text"])
    rows = corpus.filter(pl.col("passage_id").is_in(wanted))
    by_id = {pid: {"passage_id": pid, "title": str(title), "text": str(text)}
             for pid, title, text in rows.iter_rows()}
    return {q: [by_id[p] for p in pids] for q, pids in ids.items()}


@flow(name="read", log_prints=True)
def read_flow(questions_path: Path, corpus_path: Path | None, run_path: Path | None, k: int,
              llm: LLMParams, stage: str, evidence_path: Path | None = None,
              budget_tokens: int = 3000) -> tuple[pd.DataFrame, Usage]:
    """Answer every question from its top-``k`` context, from an iterative method's own
    evidence (``evidence_path``, cut to ``budget_tokens``), or without context; the answers
    (:data:`QA_COLUMNS`, sorted by ``question_id``) as pandas, which its callers index."""
    questions = read_table(questions_path, columns=["question_id", "question"])
    client = stage_client(llm, stage)  # created (and a local server started) in the flow's thread
    if evidence_path is not None:
        contexts = evidence_contexts(read_table(evidence_path), budget_tokens, client.count_tokens)
    elif run_path is None or corpus_path is None:
        contexts = None
    else:
        contexts = load_contexts(corpus_path, run_path, k)
    futures = [read_question.submit(llm, stage, qid, q, None if contexts is None else contexts.get(qid, []))
               for qid, q in questions.iter_rows()]
    rows = collect(futures, f"{stage}: questions answered")
    # pandas: the table's callers (stages/read, tests/flows) index it as pandas
    table = pd.DataFrame(rows, columns=QA_COLUMNS).sort_values("question_id").reset_index(drop=True)
    return table, stage_client(llm, stage).usage
