"""The LLM calls of the graph retrievers, each one structured call of the shared client.

* :meth:`GraphLLM.filter`: HippoRAG 2's recognition memory over the linked facts;
* :meth:`GraphLLM.query_entities`: CatRAG's query NER (symbolic anchoring);
* :meth:`GraphLLM.score_edges`: CatRAG's neighbour scoring (dynamic edge weighting).

Each returns what the model said (or None on failure) and a
:class:`~evichain.llm.usage.StepUsage` (ok / failure kind, the response's own
tokens, wall seconds of the step). The ``clean_*`` functions repair replies against the
retrieval state and count what they dropped.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from evichain.llm import LLMClient, LLMSuccess
from evichain.llm.types import Prompt, quote_json, result_tokens
from evichain.llm.usage import StepUsage
from evichain.methods.graph.params import GraphParams
from evichain.methods.graph.prompts import (QUERY_NER, edge_score_prompt, filter_prompt,
                                            ner_prompt, some_id_check)


class GraphLLM:
    """Recognition memory, query NER and edge scoring through one :class:`LLMClient`."""

    def __init__(self, client: LLMClient) -> None:
        self.client = client

    def _call(self, prompt: Prompt[Any], check: Any = None, **variables: Any) -> tuple[Any, StepUsage]:
        start = time.perf_counter()
        result = self.client.call(prompt, check=check, **variables)
        pt, ct = result_tokens(result)
        usage = StepUsage(ok=result.ok, kind="" if result.ok else result.kind, prompt_tokens=pt,
                          completion_tokens=ct, cached=bool(getattr(result, "cached", False)),
                          seconds=time.perf_counter() - start)
        return (result.value if isinstance(result, LLMSuccess) else None), usage

    def filter(self, question: str, facts: Sequence[tuple[int, Sequence[str]]],
               max_kept: int) -> tuple[list[int] | None, StepUsage]:
        """Kept fact ids (reply order, unvalidated) for ``{"question", "facts": [{id, fact}]}``."""
        ids = [i for i, _ in facts]
        data = {"question": question, "facts": [{"id": i, "fact": list(f)} for i, f in facts]}
        value, usage = self._call(filter_prompt(ids, max_kept), some_id_check(set(ids), "fact_ids"),
                                  data=data)
        return (None if value is None else [int(i) for i in value.fact_ids]), usage

    def query_entities(self, question: str) -> tuple[list[Any] | None, StepUsage]:
        """Named entities of the question (raw items)."""
        value, usage = self._call(ner_prompt(QUERY_NER), data=quote_json(question))
        return (None if value is None else list(value.named_entities)), usage

    def score_edges(self, query: str, retrieved: Sequence[Sequence[str]], entity: str,
                    neighbours: Sequence[dict[str, Any]]) -> tuple[list[tuple[int, int]] | None, StepUsage]:
        """(id, score) pairs for the neighbours of ``entity`` (raw, unvalidated)."""
        ids = [int(n["id"]) for n in neighbours]
        data = {"query": query, "retrieved_facts": [list(f) for f in retrieved], "entity": entity,
                "neighbours": list(neighbours)}
        value, usage = self._call(edge_score_prompt(ids), _scores_check(set(ids)), data=data)
        return (None if value is None else [(int(s.id), int(s.score)) for s in value.scores]), usage


def _scores_check(valid: set[int]) -> Any:
    """Client check: at least one score for a supplied id (else repair, then failure)."""

    def check(value: Any) -> None:
        if not any(int(s.id) in valid for s in value.scores):
            raise ValueError(f"no score for any of the {len(valid)} supplied neighbour ids")

    return check


# --------------------------------------------------------------------------- repairs
def clean_kept(raw: Sequence[int], candidates: Sequence[int], max_kept: int
               ) -> tuple[list[int], int, int]:
    """Valid distinct candidate ids in reply order (at most ``max_kept``), and the numbers of
    unknown and of repeated ids that were dropped."""
    allowed = {int(c) for c in candidates}
    kept: list[int] = []
    unknown = duplicates = 0
    for i in raw:
        if int(i) not in allowed:
            unknown += 1
        elif int(i) in kept:
            duplicates += 1
        else:
            kept.append(int(i))
    return kept[:max_kept], unknown, duplicates


def clean_scores(raw: Sequence[tuple[int, int]] | None, ids: Sequence[int], default: int
                 ) -> tuple[dict[int, int], dict[str, int]]:
    """Score per supplied id (first reply wins; scores clipped to 0–10; ``default`` for ids the
    reply misses or when the call failed) and counts of what was repaired."""
    counts = {"missing": 0, "unknown": 0, "duplicate": 0, "out_of_range": 0}
    allowed = set(int(i) for i in ids)
    got: dict[int, int] = {}
    for i, s in raw or []:
        if i not in allowed:
            counts["unknown"] += 1
        elif i in got:
            counts["duplicate"] += 1
        else:
            if not 0 <= s <= 10:
                counts["out_of_range"] += 1
            got[i] = min(10, max(0, s))
    for i in ids:
        if int(i) not in got:
            counts["missing"] += 1
            got[int(i)] = default
    return got, counts


def clean_mentions(raw: Sequence[Any] | None) -> list[str]:
    """Non-empty distinct (case-insensitive) string mentions."""
    out: list[str] = []
    for x in raw or []:
        if isinstance(x, (str, int, float)) and not isinstance(x, bool):
            text = " ".join(str(x).split())
            if text and text.casefold() not in {o.casefold() for o in out}:
                out.append(text)
    return out


def uses_llm(method: str, params: GraphParams) -> bool:
    """Whether ``method`` with these params calls the LLM at query time."""
    c = params.catrag
    if method == "hipporag2":
        return params.hipporag2.recognition_memory
    if method == "catrag":
        return params.hipporag2.recognition_memory or c.symbolic_anchoring or c.edge_weighting
    return False
