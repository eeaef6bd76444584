"""EviReform online retrieval: Steps 1–7 of DESIGN §4 (paper §3.5–3.8, C.1, Algorithm 1).

Per question q (embedding h_q):

1. u_i = max(0, h_iᵀh_q) (Eq. 6); candidates = the ``n_candidates`` highest positive u.
2. S_q = ids chosen by the selector (Listing 12); ids outside the candidates are dropped and
   counted; duplicates ignored; at most ``max_selected`` kept. Fallback (counted): no valid
   id → the single highest positive proposition.
3. b = b̃/‖b̃‖₁ with b̃_i = 1[i ∈ S_q]·u_i (Eq. 7–8); E_q = source passages of S_q (Eq. 9),
   ordered by the rank of their best selected proposition.
4. ≤ L residual queries from (q, E_q) (Listing 13; Listing 16 over ≤ 3 rounds, Eq. 19).
   Empty, duplicate or surplus queries are dropped.
5. Per residual query ρ: I = its k_r highest propositions, r_i = 1[i ∈ I]·max(0, h_iᵀh_ρ) /
   Σ_{j ∈ I} max(0, h_jᵀh_ρ) (Eq. 10); V = queries with positive retained similarity;
   s = β b + (1 − β) mean_V r (Eq. 11). Fallback (counted): V empty → s = b.
6. z = α s + (1 − α) T s (Eq. 12–14, sparse; :mod:`.propagation`).
7. score(d_j) = Σ_{π(i)=j} z_i / √|P_j| (Eq. 15); all passages ranked, ties by stored order.

Controls (params switches): ``residual_only`` (s = r), ``repeat_question`` (the residual
channel retrieves |V|·k_r propositions with q itself), ``reorder`` (Listing 15 orders the
first ``reorder_pool`` distinct passages of the candidates; nothing else is returned).

Our additions (issue 38; off in the paper variants, on in ``robust`` / ``hybrid``):
``backfill`` seeds b with S_q filled up to ``max_selected`` from the candidate ranking (E_q
stays the selector's); ``backstop_eps`` adds ε û to s before Step 6 (û = the candidates' u,
L1-normalised); ``tail_order: score`` ranks passages after the last positive readout score by
their best proposition's u instead of stored order. The ``hybrid`` final selection lives in
:mod:`evichain.methods.hybrid` (a subclass overriding :meth:`EviReformRetriever._final`).

Pool coverage (Appendix A.3): C₀ = the first ``pool_size`` (20) distinct source passages of
the candidates; C₊ = C₀ ∪ source passages of the retained residual propositions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evichain.methods.base import QuestionResult
from evichain.methods.evireform.index import EviReformIndex
from evichain.methods.evireform.llm_steps import EviReformLLM, StepUsage
from evichain.methods.evireform.params import EviReformParams
from evichain.methods.evireform.readout import (passage_best, passage_scores, rank_passages,
                                                rank_with_tail, readout_scale)
from evichain.methods.evireform.variants import uses_llm
from evichain.retrieval.run import top_k_indices

Encoder = Callable[[list[str]], np.ndarray]


# --------------------------------------------------------------------------- equations
def proposition_scores(H: np.ndarray, h: np.ndarray) -> np.ndarray:
    """u_i = max(0, h_iᵀh) (Eq. 6), float64."""
    return np.maximum((H @ h).astype(np.float64), 0.0)


def top_positive(u: np.ndarray, n: int) -> np.ndarray:
    """Indices of the ``n`` highest u with u > 0; ties by lower index (C.1)."""
    idx = top_k_indices(u, n)
    return idx[u[idx] > 0]


def seed_vector(u: np.ndarray, selected: Sequence[int]) -> np.ndarray:
    """b = b̃/‖b̃‖₁, b̃_i = 1[i ∈ S_q]·u_i (Eq. 7–8); zero if ‖b̃‖₁ = 0."""
    b = np.zeros_like(u)
    sel = np.asarray(list(selected), dtype=np.int64)
    b[sel] = u[sel]
    total = b.sum()
    return b / total if total > 0 else b


def backfilled(selected: Sequence[int], candidates: np.ndarray, k_s: int) -> list[int]:
    """S_q followed by the best unselected candidates until |S| = k_s (candidate order)."""
    chosen = list(selected)
    taken = set(chosen)
    for c in candidates:
        if len(chosen) >= k_s:
            break
        if int(c) not in taken:
            chosen.append(int(c))
            taken.add(int(c))
    return chosen


def backstop(u: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """û: u restricted to the candidates, L1-normalised (zero if they sum to 0)."""
    out = np.zeros_like(u)
    out[candidates] = u[candidates]
    total = out.sum()
    return out / total if total > 0 else out


def residual_signal(u_rho: np.ndarray, k_r: int) -> tuple[np.ndarray | None, np.ndarray]:
    """r^(ℓ) of Eq. 10 and the retained propositions; (None, []) if nothing is positive."""
    retained = top_positive(u_rho, k_r)
    if retained.size == 0:
        return None, retained
    r = np.zeros_like(u_rho)
    r[retained] = u_rho[retained] / u_rho[retained].sum()
    return r, retained


def combine_signals(b: np.ndarray, signals: Sequence[np.ndarray], beta: float,
                    residual_only: bool = False) -> tuple[np.ndarray, bool]:
    """s = β b + (1 − β) mean_V r (Eq. 11); (b, True) when V is empty (the fallback)."""
    if not signals:
        return b, True
    r = np.mean(np.stack(signals), axis=0)
    return (r if residual_only else beta * b + (1.0 - beta) * r), False


def first_distinct(owner: np.ndarray, props: Sequence[int], n: int) -> list[int]:
    """The first ``n`` distinct source passages of ``props`` in order (C₀, reorder pool)."""
    out: list[int] = []
    seen: set[int] = set()
    for i in props:
        j = int(owner[i])
        if j not in seen:
            seen.add(j)
            out.append(j)
            if len(out) == n:
                break
    return out


def clean_selection(raw: Sequence[int], candidates: np.ndarray, max_selected: int
                    ) -> tuple[list[int], int]:
    """Valid, distinct candidate ids in reply order, at most ``max_selected``; and the
    number of returned ids that were not candidates."""
    allowed = {int(i) for i in candidates}
    invalid = sum(1 for i in raw if int(i) not in allowed)
    valid = [int(i) for i in dict.fromkeys(int(i) for i in raw) if i in allowed]
    return valid[:max_selected], invalid


def clean_queries(raw: Sequence[str], limit: int) -> list[str]:
    """Non-empty, whitespace-collapsed, case-insensitively distinct queries, at most ``limit``."""
    out: list[str] = []
    for q in raw:
        text = " ".join(str(q).split())
        if text and text.casefold() not in {o.casefold() for o in out}:
            out.append(text)
    return out[:limit]


def order_pool(raw: Sequence[int], pool_ids: Sequence[int]) -> tuple[list[int], int]:
    """Judge order over the pool: valid ids first (distinct), then the omitted ones in pool
    order; and the number of returned ids outside the pool."""
    allowed = set(pool_ids)
    invalid = sum(1 for i in raw if int(i) not in allowed)
    ordered = [i for i in dict.fromkeys(int(i) for i in raw) if i in allowed]
    return ordered + [i for i in pool_ids if i not in set(ordered)], invalid


# --------------------------------------------------------------------------- retrieval


TRACE_DEFAULTS: dict[str, Any] = {
    "selection_status": "ok", "selection_fallback": False, "n_invalid_ids": 0,
    "selected_ids": [], "selected_ranks": [], "observed_passage_ids": [],
    "reformulation_status": "off", "residual_queries": [], "residual_rounds": [],
    "n_valid_residual": 0, "retained_residual_prop_ids": [], "residual_fallback": False,
    "rounds_used": 0, "repeat_count": 0,
    "judge_status": "off", "judge_fallback": False, "judge_invalid_ids": 0,
    "n_backfilled": 0,
    "sel_prompt_tokens": 0, "sel_completion_tokens": 0,
    "ref_prompt_tokens": 0, "ref_completion_tokens": 0,
    "judge_prompt_tokens": 0, "judge_completion_tokens": 0,
}


@dataclass
class _Work:
    """Per-question state shared by the steps (b, s: Eq. 8 and Eq. 11 vectors)."""

    question_id: str
    question: str
    u: np.ndarray
    gold: set[str]
    h_q: np.ndarray
    trace: dict[str, Any] = field(default_factory=dict)
    b: np.ndarray | None = None
    s: np.ndarray | None = None
    llm_s: float = 0.0
    encode_s: float = 0.0
    llm_cpu: float = 0.0
    encode_cpu: float = 0.0
    signals: list[np.ndarray] = field(default_factory=list)
    retained: list[int] = field(default_factory=list)
    observed: list[int] = field(default_factory=list)
    candidates: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    probe_vectors: list[np.ndarray] = field(default_factory=list)

    def charge(self, usage: StepUsage, prefix: str) -> None:
        self.llm_s += usage.seconds
        self.llm_cpu += usage.cpu_seconds
        self.trace[f"{prefix}_prompt_tokens"] += usage.prompt_tokens
        self.trace[f"{prefix}_completion_tokens"] += usage.completion_tokens


class EviReformRetriever:
    """Steps 1–7 for one question at a time (thread-safe: no mutable shared state)."""

    def __init__(self, index: EviReformIndex, params: EviReformParams,
                 llm: EviReformLLM | None, encode: Encoder) -> None:
        if uses_llm(params) and llm is None:
            raise ValueError("these evireform settings call the LLM (selection: llm, "
                             "reformulation or reorder) but no LLM client was given")
        self.index = index
        self.params = params
        self.llm = llm
        self.encode = encode
        self.scale = readout_scale(index.n_props, params.readout)

    # ------------------------------------------------------------------ driver
    def retrieve(self, question_id: str, question: str, h_q: np.ndarray,
                 gold: Sequence[str] = ()) -> QuestionResult:
        """Run Steps 1–7 (or the reorder control) for one question."""
        start, cpu = time.perf_counter(), time.thread_time()
        work = _Work(question_id, question, proposition_scores(self.index.H, h_q), set(gold),
                     np.asarray(h_q, dtype=np.float64), trace={"question_id": question_id,
                            **{k: (list(v) if isinstance(v, list) else v)
                               for k, v in TRACE_DEFAULTS.items()}})
        candidates = top_positive(work.u, self.params.n_candidates)
        work.candidates = candidates
        work.trace["candidate_ids"] = self._pids(candidates)
        self._select(work, candidates)
        if self.params.reorder:
            rows = self._reorder(work, candidates)
        else:
            self._residual(work)
            rows = self._rank(work)
        self._coverage(work, candidates)
        total, total_cpu = time.perf_counter() - start, time.thread_time() - cpu
        seconds = {"total": total, "llm": work.llm_s, "encode": work.encode_s,
                   "compute": max(0.0, total - work.llm_s - work.encode_s),
                   "compute_cpu": max(0.0, total_cpu - work.llm_cpu - work.encode_cpu)}
        return QuestionResult(rows, work.trace, seconds)

    # ------------------------------------------------------------------ step 2–3
    def _select(self, work: _Work, candidates: np.ndarray) -> None:
        """Step 2–3: S_q (with the fallback), b (Eq. 7–8) and E_q (Eq. 9)."""
        selected = self._selected_ids(work, candidates)
        if not selected and candidates.size:
            selected = [int(candidates[0])]
            work.trace["selection_fallback"] = True
        rank = {int(c): r for r, c in enumerate(candidates)}
        selected = sorted(selected, key=lambda i: rank[i])
        work.trace["selected_ids"] = self._pids(selected)
        work.trace["selected_ranks"] = [rank[i] + 1 for i in selected]
        work.observed = list(dict.fromkeys(int(self.index.owner[i]) for i in selected))
        work.trace["observed_passage_ids"] = self._passages(work.observed)
        seeds = backfilled(selected, candidates, self.params.max_selected) if self.params.backfill else selected
        work.trace["n_backfilled"] = len(seeds) - len(selected)
        work.b = seed_vector(work.u, seeds)

    def _selected_ids(self, work: _Work, candidates: np.ndarray) -> list[int]:
        """Step 2 before the fallback: Listing 12 ids cleaned (or the top candidates)."""
        p, t = self.params, work.trace
        if candidates.size == 0:
            t["selection_status"] = "no_candidates"
            return []
        if p.selection == "top":
            t["selection_status"] = "top"
            return [int(i) for i in candidates[:p.max_selected]]
        items = [(int(i), self.index.prop_texts[i]) for i in candidates]
        raw, usage = self.llm.select(work.question, items)  # type: ignore[union-attr]
        work.charge(usage, "sel")
        selected, t["n_invalid_ids"] = clean_selection(raw, candidates, p.max_selected)
        if not usage.ok:
            t["selection_status"] = f"llm_{usage.kind}"
        elif not selected:
            t["selection_status"] = "empty"
        return selected

    # ------------------------------------------------------------------ step 4–5
    def _residual(self, work: _Work) -> None:
        """Step 4–5: residual queries, their signals, and s (Eq. 10–11)."""
        p = self.params
        if p.reformulation and not work.observed:
            work.trace["reformulation_status"] = "no_evidence"
        elif p.reformulation and p.rounds == 1:
            self._one_round(work)
        elif p.reformulation:
            self._gap_rounds(work)
        if p.reformulation and p.repeat_question:
            self._repeat_question(work)
        work.trace["retained_residual_prop_ids"] = self._pids(work.retained)
        assert work.b is not None
        work.s, fallback = combine_signals(work.b, work.signals, p.beta, p.residual_only)
        work.trace["residual_fallback"] = bool(fallback and p.reformulation)

    def _one_round(self, work: _Work) -> None:
        raw, usage = self.llm.reformulate(work.question, self._evidence(work.observed))  # type: ignore[union-attr]
        work.charge(usage, "ref")
        work.trace["reformulation_status"] = "ok" if usage.ok else f"llm_{usage.kind}"
        queries = clean_queries(raw, self.params.max_residual_queries)
        self._search(work, queries, round_no=1)
        work.trace["rounds_used"] = 1

    def _gap_rounds(self, work: _Work) -> None:
        """Eq. 19: ρ_t = R(q, E_t), E_{t+1} = E_t ∪ Retrieve(ρ_t), at most ``rounds`` times."""
        evidence = list(work.observed)
        work.trace["reformulation_status"] = "ok"
        for round_no in range(1, self.params.rounds + 1):
            sufficient, raw, usage = self.llm.gaps(round_no, work.question, self._evidence(evidence))  # type: ignore[union-attr]
            work.charge(usage, "ref")
            work.trace["rounds_used"] = round_no
            if not usage.ok:
                work.trace["reformulation_status"] = f"llm_{usage.kind}"
            queries = clean_queries(raw, self.params.max_residual_queries)
            if sufficient or not queries:
                break
            added = self._search(work, queries, round_no)
            evidence += [j for j in added if j not in evidence]

    def _search(self, work: _Work, queries: list[str], round_no: int) -> list[int]:
        """Residual retrieval (Eq. 10) for ``queries``; returns the passages reached."""
        work.trace["residual_queries"] += queries
        work.trace["residual_rounds"] += [round_no] * len(queries)
        if not queries:
            return []
        start, cpu = time.perf_counter(), time.thread_time()
        Q = self.encode(queries)
        work.encode_s += time.perf_counter() - start
        work.encode_cpu += time.thread_time() - cpu
        # one matrix–vector product per query: faster here than one small GEMM (L × M)
        U = np.maximum(np.stack([self.index.H @ q for q in Q]).astype(np.float64), 0.0)
        reached: list[int] = []
        for row in range(U.shape[0]):
            r, retained = residual_signal(U[row], self.params.k_r)
            if r is None:
                continue
            work.trace["n_valid_residual"] += 1
            if not self.params.repeat_question:
                work.probe_vectors.append(np.asarray(Q[row], dtype=np.float64))
                work.signals.append(r)
                work.retained += [int(i) for i in retained if int(i) not in work.retained]
            reached += [int(self.index.owner[i]) for i in retained]
        return list(dict.fromkeys(reached))

    def _repeat_question(self, work: _Work) -> None:
        """Control: the residual channel is q itself with |V|·k_r propositions (matched count)."""
        count = work.trace["n_valid_residual"] * self.params.k_r
        work.trace["repeat_count"] = count
        r, retained = residual_signal(work.u, count) if count else (None, [])
        if r is not None:
            work.signals.append(r)
            work.retained = [int(i) for i in retained]

    # ------------------------------------------------------------------ step 6–7
    def _rank(self, work: _Work) -> list[tuple[str, int, str, float]]:
        """Step 6–7: z (Eq. 14, or z = s without propagation) and the readout (Eq. 15);
        with ``backstop_eps`` > 0, s′ = s + ε û replaces s."""
        s, p = work.s, self.params
        assert s is not None
        if p.backstop_eps > 0:
            s = s + p.backstop_eps * backstop(work.u, work.candidates)
        z = self.index.propagator.propagate(s, p.alpha, p.propagation_steps) if p.propagation else s
        scores = passage_scores(z, self.index.owner, self.scale)
        top, run_scores = self._final(work, scores)
        return [(work.question_id, r + 1, str(self.index.passage_ids[j]), float(v))
                for r, (j, v) in enumerate(zip(top, run_scores))]

    def _readout_order(self, work: _Work, scores: np.ndarray, k: int) -> np.ndarray:
        """The ``k`` best passages by readout; the zero tail by ``tail_order``."""
        if self.params.tail_order == "stored":
            return rank_passages(scores, k)
        tail = passage_best(work.u, self.index.owner, self.index.n_passages)
        return rank_with_tail(scores, tail, k)

    def _final(self, work: _Work, scores: np.ndarray) -> tuple[list[int], list[float]]:
        """Passage rows and run scores of the ranking (Eq. 15 readout order)."""
        if self.params.final != "readout":
            raise ValueError(f"evireform.final: {self.params.final} needs "
                             "evichain.methods.hybrid.HybridRetriever")
        top = self._readout_order(work, scores, self.params.top_k)
        return [int(j) for j in top], [float(scores[j]) for j in top]

    # ------------------------------------------------------------------ reorder control
    def _reorder(self, work: _Work, candidates: np.ndarray) -> list[tuple[str, int, str, float]]:
        """Listing 15 over the first ``reorder_pool`` distinct candidate passages (A.4)."""
        pool = first_distinct(self.index.owner, candidates, self.params.reorder_pool)
        if not pool:
            work.trace["judge_status"] = "no_candidates"
            return []
        local = {j: n + 1 for n, j in enumerate(dict.fromkeys(work.observed + pool))}
        evidence = [(local[j], self.index.passage_texts[j]) for j in work.observed]
        items = [(local[j], self.index.passage_texts[j]) for j in pool]
        raw, usage = self.llm.judge(work.question, evidence, items)  # type: ignore[union-attr]
        work.charge(usage, "judge")
        pool_local = [local[j] for j in pool]
        ordered, invalid = order_pool(raw, pool_local)
        by_local = {v: k for k, v in local.items()}
        work.trace.update({"judge_status": "ok" if usage.ok else f"llm_{usage.kind}",
                           "judge_fallback": not set(pool_local) & {int(i) for i in raw},
                           "judge_invalid_ids": invalid})
        n = len(ordered)
        return [(work.question_id, r + 1, str(self.index.passage_ids[by_local[i]]), float(n - r))
                for r, i in enumerate(ordered[:self.params.top_k])]

    # ------------------------------------------------------------------ analysis columns
    def _coverage(self, work: _Work, candidates: np.ndarray) -> None:
        c0 = first_distinct(self.index.owner, candidates, self.params.pool_size)
        plus = list(dict.fromkeys(c0 + [int(self.index.owner[i]) for i in work.retained]))
        cand_passages = set(self._passages(first_distinct(self.index.owner, candidates, len(candidates))))
        c0_ids, plus_ids = self._passages(c0), self._passages(plus)
        g = work.gold
        work.trace.update({
            "c0_passage_ids": c0_ids, "cplus_passage_ids": plus_ids, "n_gold": len(g),
            "gold_in_candidates": len(g & cand_passages),
            "gold_selected": len(g & set(work.trace["observed_passage_ids"])),
            "c0_gold": len(g & set(c0_ids)), "cplus_gold": len(g & set(plus_ids)),
            "c0_complete": bool(g) and g <= set(c0_ids),
            "cplus_complete": bool(g) and g <= set(plus_ids)})

    # ------------------------------------------------------------------ helpers
    def _pids(self, props: Sequence[int]) -> list[str]:
        return [str(self.index.prop_ids[i]) for i in props]

    def _passages(self, rows: Sequence[int]) -> list[str]:
        return [str(self.index.passage_ids[j]) for j in rows]

    def _evidence(self, passages: Sequence[int]) -> list[tuple[int, str]]:
        return [(n + 1, self.index.passage_texts[j]) for n, j in enumerate(passages)]
