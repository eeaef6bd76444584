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

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class Candidate:
    """One pool passage as a reranker sees it."""

    passage_id: str
    title: str
    text: str
    dense_score: float


def ranked_ids(run: pd.DataFrame) -> dict[str, list[tuple[str, float]]]:
    """question_id → [(passage_id, score)] in rank order."""
    ordered = run.sort_values(["question_id", "rank"], kind="stable")
    return {str(q): list(zip(g["passage_id"].astype(str), g["score"].astype(float)))
            for q, g in ordered.groupby("question_id", sort=False)}


def needs_deeper_pool(run: pd.DataFrame, question_ids: Sequence[str], pool_size: int,
                      n_passages: int) -> bool:
    """True when some question's dense run holds fewer than min(pool_size, |corpus|) rows."""
    want = min(pool_size, n_passages)
    depth = run.groupby("question_id").size()
    return any(int(depth.get(q, 0)) < want for q in question_ids)


def prefix_mismatches(deep: dict[str, list[tuple[str, float]]],
                      shallow: dict[str, list[tuple[str, float]]]) -> int:
    """Questions whose recomputed deep ranking does not start with the dense run's ranking."""
    bad = 0
    for qid, rows in shallow.items():
        head = [p for p, _ in deep.get(qid, [])][: len(rows)]
        bad += int(head != [p for p, _ in rows])
    return bad


def pool_of(ranking: Sequence[tuple[str, float]], pool_size: int,
            corpus: pd.DataFrame) -> list[Candidate]:
    """The first ``pool_size`` passages of a ranking with their title and text
    (``corpus`` indexed by passage_id)."""
    return [Candidate(pid, str(corpus.at[pid, "title"]), str(corpus.at[pid, "text"]), score)
            for pid, score in ranking[:pool_size]]


def reranked_rows(question_id: str, order: Sequence[str], tail: Sequence[str]
                  ) -> list[tuple[str, int, str, float]]:
    """Run rows: ``order`` (the reranked pool) then ``tail`` (the dense run below the pool),
    ranks 1..n, scores n..1; a passage already ranked is never repeated."""
    seen: set[str] = set()
    ids = [p for p in [*order, *tail] if not (p in seen or seen.add(p))]
    n = len(ids)
    return [(question_id, i + 1, pid, float(n - i)) for i, pid in enumerate(ids)]
