"""One question through a reranker: the pool's new order, then the dense tail (run rows), and
the trace row. Used by the ``retrieve_rerank`` flow and the ``listwise`` / ``cross_encoder``
methods."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evichain.methods.rerank.cross_encoder import CrossEncoderReranker
from evichain.methods.rerank.listwise import ListwiseReranker
from evichain.methods.rerank.pool import Candidate, reranked_rows

Reranker = ListwiseReranker | CrossEncoderReranker
Row = tuple[str, int, str, float]


def rerank_pool(reranker: Reranker, question_id: str, question: str, pool: list[Candidate],
                tail: Sequence[str], gold: Sequence[str]) -> tuple[list[Row], dict[str, Any]]:
    """Rerank one pool; return its run rows and trace row."""
    base = {"question_id": question_id, "pool_ids": [c.passage_id for c in pool],
            "pool_size": len(pool), "n_gold": len(gold),
            "gold_in_pool": len(set(gold) & {c.passage_id for c in pool})}
    if isinstance(reranker, ListwiseReranker):
        result = reranker.rerank(question, pool)
        order, trace = result.order, {**base, **result.trace()}
        rows = reranked_rows(question_id, order, tail) if order or result.status == "empty_pool" else []
    else:
        ce = reranker.rerank(question, pool)
        trace = {**base, "status": "ok", "fallback": False, "reranked_ids": ce.order,
                 "ce_scores": ce.scores, "prompt_tokens": 0, "completion_tokens": 0}
        rows = reranked_rows(question_id, ce.order, tail)
    return rows, trace
