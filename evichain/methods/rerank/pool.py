"""The reranking pool (EviReform Table C.2: the dense retriever's top 40) and the output run.

The pool of a question is the first ``pool_size`` passages of the dense ranking. The dense
stage writes ``retrieval.dense.top_k`` (default 20) passages per question, fewer than 40, so
when the dense run is shallower than the pool the flow recomputes the dense ranking to depth
``pool_size`` with the same encoder, passage format and tie rule (:func:`needs_deeper_pool`);
its first ranks must equal the dense run, and disagreements are counted
(:func:`prefix_mismatches`), never hidden.

Output run of a reranker: the reordered pool, then the rest of the dense run below it
(:func:`reranked_rows`). Scores are rank-derived (``n_rows − position``) so that every
reranked passage scores above every tail passage; evaluation uses the rank order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import polars as pl

from evichain.retrieval.run import format_passages, run_from_scores


@dataclass(frozen=True)
class Candidate:
    """One pool passage as a reranker sees it."""

    passage_id: str
    title: str
    text: str
    dense_score: float


def ranked_ids(run: pl.DataFrame) -> dict[str, list[tuple[str, float]]]:
    """question_id → [(passage_id, score)] in rank order; questions in sorted order (the run
    sorted by (question_id, rank), stable)."""
    ordered = run.sort(["question_id", "rank"], maintain_order=True)
    out: dict[str, list[tuple[str, float]]] = {}
    for q, p, s in zip(ordered["question_id"].to_list(), ordered["passage_id"].to_list(),
                       ordered["score"].to_list()):
        out.setdefault(str(q), []).append((str(p), float(s)))
    return out


def needs_deeper_pool(run: pl.DataFrame, question_ids: Sequence[str], pool_size: int,
                      n_passages: int) -> bool:
    """True when some question's dense run holds fewer than min(pool_size, |corpus|) rows."""
    want = min(pool_size, n_passages)
    depth = Counter(str(q) for q in run["question_id"].to_list())
    return any(depth[q] < want for q in question_ids)


def prefix_mismatches(deep: dict[str, list[tuple[str, float]]],
                      shallow: dict[str, list[tuple[str, float]]]) -> int:
    """Questions whose recomputed deep ranking does not start with the dense run's ranking."""
    bad = 0
    for qid, rows in shallow.items():
        head = [p for p, _ in deep.get(qid, [])][: len(rows)]
        bad += int(head != [p for p, _ in rows])
    return bad


def pool_of(ranking: Sequence[tuple[str, float]], pool_size: int,
            corpus: Mapping[str, tuple[str, str]]) -> list[Candidate]:
    """The first ``pool_size`` passages of a ranking with their title and text
    (``corpus``: passage_id → (title, text), :func:`evichain.retrieval.run.passage_texts`)."""
    return [Candidate(pid, *corpus[pid], score) for pid, score in ranking[:pool_size]]


def reranked_rows(question_id: str, order: Sequence[str], tail: Sequence[str]
                  ) -> list[tuple[str, int, str, float]]:
    """Run rows: ``order`` (the reranked pool) then ``tail`` (the dense run below the pool),
    ranks 1..n, scores n..1; a passage already ranked is never repeated."""
    seen: set[str] = set()
    ids = [p for p in [*order, *tail] if not (p in seen or seen.add(p))]
    n = len(ids)
    return [(question_id, i + 1, pid, float(n - i)) for i, pid in enumerate(ids)]


@dataclass
class Pools:
    """Per question: the ranking its pool is cut from and the dense run's ids below the pool;
    where the ranking came from (``dense_run`` or ``recomputed``) and how many recomputed
    rankings disagree with the dense run's first ranks."""

    ranking: dict[str, list[tuple[str, float]]]
    tail: dict[str, list[str]]
    source: str
    prefix_mismatches: int


def first_stage_pools(run: pl.DataFrame, corpus: pl.DataFrame, questions: pl.DataFrame,
                      pool_size: int, passage_format: str,
                      encode: Callable[[list[str]], Any]) -> Pools:
    """The pools of every question (module docstring): the dense run, or, when it is shallower
    than ``pool_size``, the dense ranking recomputed exactly as the dense stage computes its run
    (all questions × all passages in one product, same tie rule)."""
    qids = [str(q) for q in questions["question_id"].to_list()]
    shallow = ranked_ids(run)
    deep, source, bad = shallow, "dense_run", 0
    if needs_deeper_pool(run, qids, pool_size, len(corpus)):
        P = encode(format_passages(corpus, passage_format))
        Q = encode(questions["question"].to_list())
        deep = ranked_ids(run_from_scores(qids, Q @ P.T, corpus["passage_id"].to_list(), pool_size))
        source, bad = "recomputed", prefix_mismatches(deep, shallow)
    tail = {q: [p for p, _ in shallow.get(q, [])[pool_size:]] for q in qids}
    return Pools(deep, tail, source, bad)


def rerank_summary(trace: pd.DataFrame, pools: Pools, method: str) -> dict[str, Any]:
    """Counts for the stage summary (statuses, fallbacks, repairs, pool coverage)."""
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
