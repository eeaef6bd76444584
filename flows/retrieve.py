"""Retrieval flows for the LLM-free baselines (BM25, dense).

Flows take artifact paths, not tables: Prefect records flow parameters on its server, so
they must stay small. Dense: passages and questions are encoded in shards fanned out as
tasks (the embedding cache makes re-runs free), scored, and cut to the top k. BM25: one
indexing step, then question shards scored as tasks. Both return the run as a polars table
(:func:`evichain.retrieval.run.run_rows`: ``question_id, rank, passage_id, score``, questions
in table order); the DVC stages run the same methods through :mod:`flows.method`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from evichain.config import BM25Params, DenseParams, EmbedParams, OrchestrationParams
from evichain.embed import get_embedder
from evichain.io import read_table
from evichain.retrieval.bm25 import BM25Index
from evichain.retrieval.run import format_passages, run_rows, top_k_rows
from flows.common import collect, shard_size, shards


@task(retries=2, retry_delay_seconds=5, cache_policy=NO_CACHE, task_run_name="encode-{label}-{start}")
def encode_shard(texts: list[str], embed: EmbedParams, label: str, start: int) -> np.ndarray:
    """Encode one shard of texts (cache first)."""
    return get_embedder(embed).encode(texts)


def encode_all(texts: list[str], embed: EmbedParams, orch: OrchestrationParams, label: str) -> np.ndarray:
    """Fan out the encoding of ``texts`` over tasks; returns the stacked vectors in order."""
    size = shard_size(len(texts), orch.max_workers, minimum=256)
    starts = list(range(0, len(texts), size))
    futures = [encode_shard.submit(list(chunk), embed, label, s)
               for s, chunk in zip(starts, shards(texts, size))]
    out = collect(futures, f"encode {label}", [min(size, len(texts) - s) for s in starts])
    if not out:
        return np.zeros((0, get_embedder(embed).dim), dtype=np.float32)
    return np.concatenate(out)


@flow(name="retrieve-dense", log_prints=True)
def dense_flow(corpus_path: Path, questions_path: Path, dense: DenseParams,
               embed: EmbedParams, orch: OrchestrationParams) -> pl.DataFrame:
    """Dense top-k: cosine similarity of normalised question and passage embeddings, ties by
    corpus order."""
    corpus, questions = read_table(corpus_path), read_table(questions_path)
    passages = encode_all(format_passages(corpus, dense.passage_format), embed, orch, "passages")
    queries = encode_all(questions["question"].to_list(), embed, orch, "questions")
    return run_rows(top_k_rows(questions["question_id"].to_list(), queries @ passages.T,
                               corpus["passage_id"].to_list(), dense.top_k))


@task(cache_policy=NO_CACHE, task_run_name="bm25-search-{start}")
def bm25_shard(index: BM25Index, qids: list[str], texts: list[str], start: int) -> pl.DataFrame:
    """Search one shard of questions (its run rows as a polars run table)."""
    return run_rows(index.search_rows(qids, texts))


@flow(name="retrieve-bm25", log_prints=True)
def bm25_flow(corpus_path: Path, questions_path: Path, bm25: BM25Params,
              orch: OrchestrationParams) -> pl.DataFrame:
    """BM25 top-k over the corpus (bm25s), the shards' runs concatenated in question order."""
    corpus, questions = read_table(corpus_path), read_table(questions_path)
    index = BM25Index(corpus, bm25)
    qids, texts = questions["question_id"].to_list(), questions["question"].to_list()
    size = shard_size(len(qids), orch.max_workers, minimum=100)
    futures = [(bm25_shard.submit(index, list(q), list(t), s), len(q))
               for s, q, t in zip(range(0, len(qids), size), shards(qids, size), shards(texts, size))]
    parts = collect([f for f, _ in futures], "bm25 questions", [n for _, n in futures])
    return pl.concat(parts) if parts else run_rows([])
