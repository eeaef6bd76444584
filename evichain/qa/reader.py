"""The shared reader: one LLM call per question over its final context.

Context = the method's top ``k`` passages (ranking methods, EviReform §4.2: K = 5) or an
iterative method's own evidence cut to a token budget (3,000 tokens of the reader model's
tokenizer, counted with litellm's token counter). A failed call is a status row
(``status="failed"``, ``error_kind``, ``error``), never an empty answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

from evichain.llm import LLMClient, LLMSuccess
from evichain.qa.prompts import DIRECT, READER

QA_COLUMNS = ["question_id", "prediction", "status", "error_kind", "error", "context_passage_ids",
              "prompt_tokens", "completion_tokens"]


def top_k_contexts(run: pl.DataFrame, k: int) -> dict[str, list[str]]:
    """question_id → the first ``k`` passage ids of a run, in rank order (``rank`` ascending,
    nulls last; equal ranks keep their row order)."""
    ordered = (run.select(pl.col("question_id").cast(pl.String), "rank", pl.col("passage_id").cast(pl.String))
               .drop_nulls("question_id").sort(["question_id", "rank"], nulls_last=True, maintain_order=True))
    top = ordered.group_by("question_id", maintain_order=True).agg(pl.col("passage_id").head(k))
    return dict(top.iter_rows())


def fit_to_budget(passages: Sequence[dict[str, str]], budget: int,
                  count: Callable[[str], int]) -> list[dict[str, str]]:
    """The longest prefix of ``passages`` whose serialized texts fit in ``budget`` tokens.

    A passage that would overflow is truncated to the remaining budget (word-wise) rather than
    dropped when it is the first one, so the reader never gets an empty context.
    """
    kept: list[dict[str, str]] = []
    used = 0
    for p in passages:
        cost = count(f"{p['title']}\n{p['text']}")
        if used + cost <= budget:
            kept.append(p)
            used += cost
            continue
        if not kept:
            words = p["text"].split()
            share = max(1, int(len(words) * (budget - used) / max(cost, 1)))
            kept.append({**p, "text": " ".join(words[:share])})
        break
    return kept


def evidence_contexts(evidence: pl.DataFrame, budget: int,
                      count: Callable[[str], int]) -> dict[str, list[dict[str, str]]]:
    """question_id → an iterative method's own evidence (``position`` ascending, nulls last;
    equal positions keep their row order), cut to ``budget`` tokens with :func:`fit_to_budget`
    (EviReform §4.2: 3,000 tokens of the reader's tokenizer)."""
    ordered = (evidence.drop_nulls("question_id")
               .sort(["question_id", "position"], nulls_last=True, maintain_order=True))
    out: dict[str, list[dict[str, str]]] = {}
    for (qid,), group in ordered.group_by("question_id", maintain_order=True):
        items = [{"passage_id": str(p), "title": str(t), "text": str(x)}
                 for p, t, x in group.select("passage_id", "title", "text").iter_rows()]
        out[str(qid)] = fit_to_budget(items, budget, count)
    return out


def read_one(client: LLMClient, question: str, passages: Sequence[dict[str, str]] | None) -> dict[str, Any]:
    """Answer one question (``passages=None`` → direct inference, Listing 3)."""
    if passages is None:
        result = client.call(DIRECT, payload={"question": question})
    else:
        evidence = [{"title": p["title"], "text": p["text"]} for p in passages]
        result = client.call(READER, payload={"question": question, "evidence": evidence})
    if isinstance(result, LLMSuccess):
        # the answer's own token counts (identical on a cache hit), so re-runs write the same bytes
        pt, ct = result.response_tokens
        return {"prediction": result.value.answer, "status": "ok", "error_kind": "", "error": "",
                "prompt_tokens": pt, "completion_tokens": ct}
    return {"prediction": None, "prompt_tokens": 0, "completion_tokens": 0, **result.status_row()}
