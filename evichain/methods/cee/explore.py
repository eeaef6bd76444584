"""Sequential evidence exploration (paper §2.3.2, Eq. 1).

Round 1: P_1(q) = {q} ∪ probes generated from q (``question_as_probe``; the paper: "the first
round uses the original question together with an initial set of probes"). Each probe retrieves
its top-K_cand passages by sim(p, d) over the whole corpus (ties by stored order) and
A_t(q) = A_{t−1}(q) ∪ ⋃_p Ret(p) (Eq. 1). After each round t < T an LLM writes the evidence
summary e_t from (q, P_t(q), the round's retrieved passages), then the next probes from (q, e_t).
P(q) = ⋃_t P_t(q) (a set: a probe equal to an earlier one, case-insensitively, is dropped).

Decisions the paper leaves open (documented here and in PROMPTS.md):

* the summary sees the passages retrieved *in round t* — round-robin over the round's probes by
  rank, distinct, at most ``summary_max_passages``, each cut to ``summary_passage_words``;
* exploration stops early (``stop_reason``) when a round brings no new probe, or when the summary
  or the probe call fails after the client's retries and repair; if round 1 has no probe at all
  (generation failed and ``question_as_probe`` is off) q itself is used (``question_fallback``).

Without sequential exploration (Table 2 ablation) only round 1 runs (no summary).

With ``bridge_expansion`` (ours, variant ``robust``; :mod:`.bridge`) each round's pool also
gets B_t(q), the passages whose title the round's scanned passages name:
A_t(q) = A_{t−1}(q) ∪ ⋃_p Ret(p) ∪ B_t(q). The summary, and so every LLM call, is unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evichain.llm import LLMClient, LLMSuccess
from evichain.llm.types import Prompt
from evichain.llm.usage import StepUsage
from evichain.methods.cee.bridge import BridgeIndex
from evichain.methods.cee.facets import Passage, step_tokens
from evichain.methods.cee.params import CEEParams
from evichain.methods.cee.prompts import (clean_texts, cut_words, minified, nonempty_check,
                                          probe_prompt, summary_prompt)
from evichain.retrieval.run import top_k_indices

Encoder = Callable[[list[str]], np.ndarray]


class ExploreLLM:
    """The probe and summary calls of one question, through one :class:`LLMClient`."""

    def __init__(self, client: LLMClient, params: CEEParams) -> None:
        self.client = client
        self.params = params
        self._initial = probe_prompt(True, params.n_probes)
        self._next = probe_prompt(False, params.n_probes)
        self._summary = summary_prompt(params.summary_max_words)

    def _call(self, prompt: Prompt[Any], field_name: str, data: dict[str, Any]) -> tuple[Any, StepUsage]:
        start = time.perf_counter()
        result = self.client.call(prompt, check=nonempty_check(field_name), data=minified(data))
        pt, ct = step_tokens(self.client, result)
        usage = StepUsage(ok=result.ok, kind="" if result.ok else result.kind, prompt_tokens=pt,
                          completion_tokens=ct, seconds=time.perf_counter() - start)
        return (getattr(result.value, field_name) if isinstance(result, LLMSuccess) else None), usage

    def initial_probes(self, question: str) -> tuple[list[str] | None, StepUsage]:
        """P_1 probes generated from q (None on failure)."""
        value, usage = self._call(self._initial, "probes", {"question": question})
        return (None if value is None else clean_texts(value, self.params.n_probes)), usage

    def next_probes(self, question: str, summary: str) -> tuple[list[str] | None, StepUsage]:
        """P_{t+1} probes from (q, e_t) (None on failure)."""
        value, usage = self._call(self._next, "probes",
                                  {"question": question, "evidence_summary": summary})
        return (None if value is None else clean_texts(value, self.params.n_probes)), usage

    def summarize(self, question: str, probes: Sequence[str],
                  passages: Sequence[Passage]) -> tuple[str | None, StepUsage]:
        """e_t from (q, P_t, the round's passages) (None on failure)."""
        words = self.params.summary_passage_words
        data = {"question": question, "probes": list(probes),
                "passages": [{"title": p.title, "text": cut_words(p.text, words)} for p in passages]}
        value, usage = self._call(self._summary, "summary", data)
        return (None if value is None else " ".join(str(value).split())), usage


def retrieve_probes(P: np.ndarray, E: np.ndarray, k: int) -> list[np.ndarray]:
    """Ret_{K_cand}(p, D) for each probe row of P: top-k corpus rows by sim, ties by lower row."""
    scores = np.asarray(P, dtype=np.float64) @ np.asarray(E, dtype=np.float64).T
    return [top_k_indices(row, k) for row in scores]


def round_passages(hits: Sequence[np.ndarray], limit: int) -> list[int]:
    """The round's passages for the summary: round-robin over probes by rank, distinct."""
    out: list[int] = []
    depth = max((len(h) for h in hits), default=0)
    for r in range(depth):
        for h in hits:
            if r < len(h) and int(h[r]) not in out:
                out.append(int(h[r]))
                if len(out) == limit:
                    return out
    return out


@dataclass
class Exploration:
    """What exploration produced for one question (P(q), A(q), summaries, usage)."""

    probes: list[str] = field(default_factory=list)
    probe_rounds: list[int] = field(default_factory=list)
    probe_vectors: np.ndarray | None = None
    pool: list[int] = field(default_factory=list)
    pool_sizes: list[int] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)
    bridge_rows: list[int] = field(default_factory=list)
    bridge_rounds: list[int] = field(default_factory=list)
    bridge_sources: list[int] = field(default_factory=list)
    stop_reason: str = "rounds"
    failures: list[str] = field(default_factory=list)
    llm_steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_seconds: float = 0.0
    encode_seconds: float = 0.0

    @property
    def rounds_run(self) -> int:
        return len(self.pool_sizes)

    def charge(self, usage: StepUsage, label: str) -> None:
        self.llm_steps += 1
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.llm_seconds += usage.seconds
        if not usage.ok:
            self.failures.append(f"{label}:{usage.kind}")


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def _fresh(candidates: Sequence[str], seen: Sequence[str]) -> list[str]:
    """Candidates not yet in P(q) and distinct among themselves (whitespace- and
    case-insensitive), first occurrence kept, texts unchanged."""
    keys = {_key(p) for p in seen}
    out = []
    for p in candidates:
        if _key(p) not in keys:
            keys.add(_key(p))
            out.append(p)
    return out


class Explorer:
    """Runs T rounds of Eq. 1 for one question at a time (no mutable shared state).

    ``bridge``: the corpus's :class:`BridgeIndex` when ``params.bridge_expansion`` (built here
    if not given; once per explorer, shared read-only by the questions).
    """

    def __init__(self, E: np.ndarray, passages: Sequence[Passage], params: CEEParams,
                 llm: ExploreLLM, encode: Encoder, bridge: BridgeIndex | None = None) -> None:
        self.E = E
        self.passages = passages
        self.params = params
        self.llm = llm
        self.encode = encode
        self.bridge = (bridge or BridgeIndex(passages)) if params.bridge_expansion else None

    def run(self, question: str) -> Exploration:
        """Exploration for q (module docstring)."""
        ex = Exploration()
        probes = self._first_probes(ex, question)
        vectors: list[np.ndarray] = []
        pool: set[int] = set()
        q_vec: np.ndarray | None = None
        rounds = self.params.effective_rounds
        for t in range(1, rounds + 1):
            new = _fresh(probes, ex.probes)
            if not new:
                ex.stop_reason = "no_new_probes"
                break
            hits = self._retrieve(ex, new, t, vectors)
            pool.update(int(i) for h in hits for i in h)
            if self.bridge is not None:
                if q_vec is None:
                    q_vec = self._encode_question(ex, question)
                self._expand(ex, hits, pool, q_vec, t)
            ex.pool_sizes.append(len(pool))
            if t == rounds:
                break
            probes = self._next_round(ex, question, new, hits, t)
            if probes is None:
                break
        ex.pool = sorted(pool)
        ex.probe_vectors = np.stack(vectors) if vectors else np.zeros((0, self.E.shape[1]))
        return ex

    def _encode_question(self, ex: Exploration, question: str) -> np.ndarray:
        """φ(q) for the bridge ordering (embedding service, cached)."""
        start = time.perf_counter()
        q = np.asarray(self.encode([question]), dtype=np.float64)[0]
        ex.encode_seconds += time.perf_counter() - start
        return q

    def _expand(self, ex: Exploration, hits: list[np.ndarray], pool: set[int], q: np.ndarray,
                t: int) -> None:
        """Add B_t(q) to ``pool`` (:mod:`.bridge`); the scanned passages are the summary's
        (``bridge_scan: summary``) or every passage retrieved in round t (``retrieved``)."""
        assert self.bridge is not None
        limit = (self.params.summary_max_passages if self.params.bridge_scan == "summary"
                 else sum(len(h) for h in hits))
        scanned = round_passages(hits, limit) if limit else []
        added = self.bridge.expand_with_sources(scanned, pool, q, self.E,
                                                self.params.bridge_max_per_round)
        pool.update(row for row, _ in added)
        ex.bridge_rows.extend(row for row, _ in added)
        ex.bridge_sources.extend(src for _, src in added)
        ex.bridge_rounds.extend([t] * len(added))

    def _first_probes(self, ex: Exploration, question: str) -> list[str]:
        generated, usage = self.llm.initial_probes(question)
        ex.charge(usage, "round1:probes")
        probes = ([question] if self.params.question_as_probe else []) + (generated or [])
        if not probes:
            ex.failures.append("round1:question_fallback")
            probes = [question]
        return probes

    def _retrieve(self, ex: Exploration, new: list[str], t: int,
                  vectors: list[np.ndarray]) -> list[np.ndarray]:
        """Encode the round's new probes (embedding service, cached) and retrieve (Eq. 1)."""
        start = time.perf_counter()
        P = np.asarray(self.encode(new), dtype=np.float64)
        ex.encode_seconds += time.perf_counter() - start
        vectors.extend(P)
        ex.probes.extend(new)
        ex.probe_rounds.extend([t] * len(new))
        return retrieve_probes(P, self.E, self.params.k_cand)

    def _next_round(self, ex: Exploration, question: str, probes: list[str],
                    hits: list[np.ndarray], t: int) -> list[str] | None:
        shown = [self.passages[i] for i in round_passages(hits, self.params.summary_max_passages)]
        summary, usage = self.llm.summarize(question, probes, shown)
        ex.charge(usage, f"round{t}:summary")
        if summary is None:
            ex.stop_reason = "summary_failed"
            return None
        ex.summaries.append(summary)
        nxt, usage = self.llm.next_probes(question, summary)
        ex.charge(usage, f"round{t + 1}:probes")
        if nxt is None:
            ex.stop_reason = "probes_failed"
        return nxt
