"""What the four iterative baselines share: passage search, the per-question episode (LLM
calls with token accounting, retrieval steps, order of first retrieval, repairs, stop reason)
and the three outputs of a question (run rows, evidence rows, one trace row).

Run table (:func:`run_rows`): the passages a method retrieved, ranked by the order in which they
were first retrieved (within one retrieval, by retriever score), with score 1/rank. Evidence
rows: the method's own final context for the shared reader, most useful first (each method
says what that means), ``text`` being the passage or the sentences of it that the method kept.

Stop reasons: ``answered`` (the method's own stopping rule fired), ``step_limit``,
``llm_failure`` (a failed LLM step; the evidence gathered so far is kept) and ``no_progress``
(a step changed nothing, so a temperature-0 model would only repeat itself).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import pandas as pd
import polars as pl

from evichain.llm import LLMClient, LLMFailure, LLMSuccess
from evichain.llm.types import Prompt, result_tokens
from evichain.methods.base import Outcome
from evichain.retrieval.bm25 import BM25Index
from evichain.retrieval.run import top_k_indices

Encoder = Callable[[list[str]], np.ndarray]
STOP_REASONS: tuple[str, ...] = ("answered", "step_limit", "llm_failure", "no_progress")
EVIDENCE_COLUMNS = ["question_id", "position", "passage_id", "title", "text"]
EVIDENCE_SCHEMA = pl.Schema({"question_id": pl.String, "position": pl.Int32, "passage_id": pl.String,
                             "title": pl.String, "text": pl.String})
"""The evidence table's dtypes (position 1-based, in reading order)."""


# --------------------------------------------------------------------------- passages
@dataclass(frozen=True)
class Passages:
    """The corpus in stored order: row ``j`` is passage ``ids[j]``."""

    ids: list[str]
    titles: list[str]
    texts: list[str]

    @classmethod
    def from_corpus(cls, corpus: pl.DataFrame) -> "Passages":
        """The corpus columns as ``str`` lists, in row order."""
        return cls(*([str(v) for v in corpus[c].to_list()] for c in ("passage_id", "title", "text")))

    def item(self, row: int) -> dict[str, str]:
        """``{"title", "text"}`` of a passage, as prompts quote it."""
        return {"title": self.titles[row], "text": self.texts[row]}

    def items(self, rows: Sequence[int]) -> list[dict[str, str]]:
        return [self.item(r) for r in rows]


# --------------------------------------------------------------------------- search
class Searcher(Protocol):
    """Top-k passages for a text query: ``[(row, score)]``, best first."""

    def search(self, query: str, k: int, exclude: Collection[int] = ()) -> list[tuple[int, float]]: ...


def top_rows(scores: np.ndarray, k: int, exclude: Collection[int] = (),
             positive_only: bool = False) -> list[tuple[int, float]]:
    """The ``k`` highest-scoring rows not in ``exclude`` (ties by lower row, as EviReform C.1);
    with ``positive_only`` only rows scoring above zero."""
    s = np.asarray(scores, dtype=np.float64).copy()
    if exclude:
        s[np.fromiter(exclude, dtype=np.int64)] = -np.inf
    idx = top_k_indices(s, k)
    keep = s[idx] > 0 if positive_only else np.isfinite(s[idx])
    return [(int(j), float(s[j])) for j in idx[keep]]


class DenseSearcher:
    """score(q, d) = φ(q)ᵀφ(d) with L2-normalised embeddings (the project's dense retriever)."""

    def __init__(self, vectors: np.ndarray, encode: Encoder) -> None:
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.encode = encode

    def search(self, query: str, k: int, exclude: Collection[int] = ()) -> list[tuple[int, float]]:
        return top_rows(self.vectors @ self.encode([query])[0], k, exclude)


class BM25Searcher:
    """BM25 (bm25s, ``retrieval.bm25``); only passages matching a query term are returned."""

    def __init__(self, index: BM25Index) -> None:
        self.index = index

    def search(self, query: str, k: int, exclude: Collection[int] = ()) -> list[tuple[int, float]]:
        return top_rows(self.index.scores([query])[0], k, exclude, positive_only=True)


# --------------------------------------------------------------------------- episode
@dataclass
class Step:
    """One retrieval of an episode: the query and the rows it returned (best first)."""

    query: str
    rows: list[int]


@dataclass
class Episode:
    """The state of one question's run: LLM calls, retrievals, repairs, stop reason."""

    question_id: str
    question: str
    client: LLMClient
    order: list[int] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    repairs: Counter[str] = field(default_factory=Counter)
    failure: LLMFailure | None = None
    failed_step: str = ""
    stop_reason: str = ""
    answer: str | None = None
    n_steps: int = 0

    def ask(self, step: str, prompt: Prompt[Any], **variables: Any) -> Any | None:
        """One LLM call; tokens counted (a cache hit counts the stored response's tokens, so
        traces do not depend on the cache). A failure is kept and ``None`` returned."""
        result = self.client.call(prompt, **variables)
        pt, ct = result_tokens(result)
        self.calls += 1
        self.prompt_tokens += pt
        self.completion_tokens += ct
        if isinstance(result, LLMSuccess):
            return result.value
        self.failure, self.failed_step = result, step
        return None

    def retrieve(self, searcher: Searcher, query: str, k: int,
                 exclude: Collection[int] = ()) -> list[int]:
        """Search ``query`` and record the step; the caller decides what it keeps (:meth:`add`)."""
        rows = [r for r, _ in searcher.search(query, k, exclude)]
        self.steps.append(Step(query, rows))
        return rows

    def add(self, rows: Sequence[int]) -> list[int]:
        """Append rows not retrieved before to the first-retrieval order; return the new ones."""
        seen = set(self.order)
        new = [r for r in dict.fromkeys(rows) if r not in seen]
        self.order += new
        return new

    def repair(self, kind: str, n: int = 1) -> None:
        """Count a repaired defect of the model's output (dropped id, empty query, …)."""
        if n:
            self.repairs[kind] += n

    def stop(self, reason: str) -> None:
        if reason not in STOP_REASONS:
            raise ValueError(f"unknown stop reason {reason!r}")
        self.stop_reason = reason


def run_rows(question_id: str, passages: Passages, order: Sequence[int]
             ) -> list[tuple[str, int, str, float]]:
    """(question_id, rank, passage_id, 1/rank) for ``order`` (distinct rows, best first)."""
    return [(question_id, r, passages.ids[j], 1.0 / r) for r, j in enumerate(dict.fromkeys(order), 1)]


def evidence_rows(question_id: str, passages: Passages,
                  items: Sequence[tuple[int, str]]) -> list[dict[str, Any]]:
    """Evidence rows from ``(row, text)`` pairs in reading order (position from 1)."""
    return [{"question_id": question_id, "position": n, "passage_id": passages.ids[j],
             "title": passages.titles[j], "text": text} for n, (j, text) in enumerate(items, 1)]


def clean_text(value: str | None) -> str:
    """Whitespace-collapsed text; ``None`` and the strings "null"/"none" become ""."""
    text = " ".join(str(value or "").split())
    return "" if text.casefold() in {"null", "none"} else text


def finish(ep: Episode, method: str, passages: Passages, evidence: Sequence[tuple[int, str]],
           extras: dict[str, Any], ranking: Sequence[int] | None = None) -> Outcome:
    """The outcome of a finished episode (``ranking`` defaults to first-retrieval order)."""
    if not ep.stop_reason:
        raise RuntimeError(f"{method} episode {ep.question_id} ended without a stop reason")
    failed = ep.failure is not None
    trace = {
        "question_id": ep.question_id, "method": method, "stop_reason": ep.stop_reason,
        "status": "failed" if failed else "ok",
        "error_kind": ep.failure.kind if failed else "",
        "error": f"{ep.failed_step}: {ep.failure.reason[:400]}" if failed else "",
        "n_steps": ep.n_steps, "n_llm_calls": ep.calls,
        "prompt_tokens": ep.prompt_tokens, "completion_tokens": ep.completion_tokens,
        "queries": [s.query for s in ep.steps],
        "step_retrieved_ids": [[passages.ids[r] for r in s.rows] for s in ep.steps],
        "retrieved_ids": [passages.ids[r] for r in ep.order],
        "evidence_ids": [passages.ids[r] for r, _ in evidence],
        "n_repaired": int(sum(ep.repairs.values())),
        "repairs": json.dumps(dict(sorted(ep.repairs.items()))),
        "method_answer": ep.answer,
        **extras,
    }
    order = ep.order if ranking is None else ranking
    return Outcome(run_rows(ep.question_id, passages, order), trace,
                   evidence=evidence_rows(ep.question_id, passages, evidence))


# --------------------------------------------------------------------------- baselines
@dataclass(frozen=True)
class Exploration:
    """What a baseline's episode found for one question (the arguments of :func:`finish`):
    ``evidence``, ``(row, text)`` pairs in reading order; ``extras``, the method's own trace
    columns; ``ranking``, the run order (``None``: first-retrieval order)."""

    evidence: Sequence[tuple[int, str]]
    extras: dict[str, Any]
    ranking: Sequence[int] | None = None


ParamsT = TypeVar("ParamsT")


class IterativeBaseline(ABC, Generic[ParamsT]):
    """An iterative baseline over the corpus ``passages``, retrieving with ``searcher``,
    configured by its params block (``ParamsT``), run one question at a time.

    :meth:`run` opens an :class:`Episode`, lets the method's :meth:`explore` loop fill it and
    returns :func:`finish`'s outcome. No per-question state lives on the instance, so one
    instance serves concurrent questions (thread-safe). Subclasses set ``name``.
    """

    name: str

    def __init__(self, passages: Passages, searcher: Searcher, params: ParamsT) -> None:
        self.passages = passages
        self.searcher = searcher
        self.params = params

    def run(self, client: LLMClient, question_id: str, question: str) -> Outcome:
        """The outcome of ``question``: a fresh episode, explored, then finished."""
        ep = Episode(question_id, question, client)
        found = self.explore(ep)
        return finish(ep, self.name, self.passages, found.evidence, found.extras,
                      ranking=found.ranking)

    @abstractmethod
    def explore(self, ep: Episode) -> Exploration:
        """The method's loop over one question (``ep.question``); sets the stop reason."""


def summarize(method: str, traces: pd.DataFrame) -> dict[str, Any]:
    """Stage summary: stop reasons, failures, repairs and per-question means (tokens, calls,
    steps, retrieved and evidence passages)."""
    out: dict[str, Any] = {"method": method, "questions": len(traces)}
    if traces.empty:
        return {**out, "stop_reasons": {r: 0 for r in STOP_REASONS}, "llm_failures": 0,
                "failure_kinds": {}, "repairs": {}, "per_question": {}}
    repairs: Counter[str] = Counter()
    for text in traces["repairs"]:
        repairs.update(json.loads(text))
    failed = traces[traces["status"] == "failed"]

    def mean(values: Any) -> float:
        return round(float(np.mean(list(values))), 3)

    return {
        **out,
        "stop_reasons": {r: int((traces["stop_reason"] == r).sum()) for r in STOP_REASONS},
        "llm_failures": len(failed),
        "failure_kinds": {str(k): int(v) for k, v in failed["error_kind"].value_counts().items()},
        "repairs": dict(sorted(repairs.items())),
        "per_question": {
            "prompt_tokens_mean": mean(traces["prompt_tokens"]),
            "completion_tokens_mean": mean(traces["completion_tokens"]),
            "llm_calls_mean": mean(traces["n_llm_calls"]),
            "steps_mean": mean(traces["n_steps"]),
            "retrieved_mean": mean(len(x) for x in traces["retrieved_ids"]),
            "evidence_mean": mean(len(x) for x in traces["evidence_ids"]),
        },
    }
