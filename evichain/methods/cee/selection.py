"""Coverage-aware final evidence selection (paper §2.3.4, Eq. 7–8) and the final ranking.

Candidates are indexed 0..n_d−1 in stored corpus order, so every tie (equal utility or equal
score) goes to the passage stored first — the project's tie rule (EviReform C.1) — and a
ranking is a deterministic function of the scores.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evichain.retrieval.run import top_k_indices


def coverage_state(g: np.ndarray, selected: list[int]) -> np.ndarray:
    """γ_S(p) = max_{d' ∈ S} g(p, d'), with γ_∅(p) = 0 (n_p)."""
    if not selected:
        return np.zeros(g.shape[0])
    return g[:, selected].max(axis=1)


def coverage_gain(g: np.ndarray, gamma: np.ndarray, normalise: bool = False) -> np.ndarray:
    """Eq. 7: Δ_cov(d | S) = Σ_p max(0, g(p, d) − γ_S(p)) for every candidate d (n_d).

    With ``normalise`` (``cee.coverage_normalise``, ours): Δ_cov(d | S) / |P(q)|, |P(q)| = the
    number of probes (rows of g), so the gain is a mean over probes in [0, 2] and does not swamp
    s(d) when there are many probes. Without probes the gain is 0 either way.
    """
    gain = np.maximum(0.0, g - gamma[:, None]).sum(axis=0)
    if normalise and g.shape[0] > 0:
        return gain / g.shape[0]
    return gain


@dataclass(frozen=True)
class Selection:
    """Greedy picks in order and the utility s(d*) + Δ_cov(d* | S) at each pick."""

    order: list[int]
    utility: list[float]


def greedy_select(s: np.ndarray, g: np.ndarray, k: int, normalise: bool = False) -> Selection:
    """Eq. 8 repeated until |S| = min(k, n_d): d* = argmax_{d ∉ S} s(d) + Δ_cov(d | S)
    (Δ_cov / |P(q)| with ``normalise``, see :func:`coverage_gain`).

    γ is updated after each pick (γ ← max(γ, g(·, d*))); ties go to the lower index.
    """
    n = s.shape[0]
    taken = np.zeros(n, dtype=bool)
    gamma = np.zeros(g.shape[0])
    order: list[int] = []
    utility: list[float] = []
    for _ in range(min(k, n)):
        u = np.where(taken, -np.inf, s + coverage_gain(g, gamma, normalise))
        best = int(np.argmax(u))  # first maximum = lowest index on ties
        order.append(best)
        utility.append(float(u[best]))
        taken[best] = True
        gamma = np.maximum(gamma, g[:, best])
    return Selection(order, utility)


def final_ranking(s: np.ndarray, g: np.ndarray, k_final: int, top_k: int,
                  coverage: bool = True, normalise: bool = False) -> tuple[list[int], list[float]]:
    """Candidate indices and run scores, at most ``top_k`` of them.

    With ``coverage``: the greedy order of Eq. 8 (score = the utility at its pick, which never
    increases from pick to pick), then the rest of the pool by s(d). Without (Table 2 ablation):
    the pool ranked by s(d) alone. Scores never increase down the ranking: every unpicked d has
    s(d) ≤ its utility ≤ the last pick's utility. ``normalise``: Eq. 7's gain divided by
    |P(q)| in the greedy picks (``cee.coverage_normalise``).
    """
    if not coverage:
        idx = top_k_indices(s, top_k)
        return [int(i) for i in idx], [float(s[i]) for i in idx]
    sel = greedy_select(s, g, k_final, normalise)
    picked = set(sel.order)
    rest = np.array([i for i in range(s.shape[0]) if i not in picked], dtype=np.int64)
    tail = rest[top_k_indices(s[rest], top_k - len(sel.order))] if rest.size else rest
    return sel.order + [int(i) for i in tail], sel.utility + [float(s[i]) for i in tail]
