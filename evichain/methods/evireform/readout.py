"""Passage readout (paper §3.8, Eq. 15) and the final ranking (paper C.1 tie rule).

score(d_j) = (1/√|P_j|) Σ_{i: π(i) = j} z_i, |P_j| the number of propositions extracted from
d_j. ``mode`` ``sum`` (factor 1) and ``mean`` (factor 1/|P_j|) are offered for analysis only;
the paper uses ``sqrt`` throughout. Passages without propositions score 0. Ranking sorts all
passages by score, ties by stored passage order.
"""

from __future__ import annotations

import numpy as np

from evichain.retrieval.run import top_k_indices


def readout_scale(n_props: np.ndarray, mode: str = "sqrt") -> np.ndarray:
    """Per-passage factor of Eq. 15: 1/√|P_j| (``sqrt``), 1 (``sum``) or 1/|P_j| (``mean``)."""
    n = np.asarray(n_props, dtype=np.float64)
    if mode == "sum":
        return (n > 0).astype(np.float64)
    base = np.sqrt(n) if mode == "sqrt" else n
    if mode not in ("sqrt", "mean"):
        raise ValueError(f"unknown readout mode '{mode}' (sqrt | sum | mean)")
    out = np.zeros_like(n)
    np.divide(1.0, base, out=out, where=n > 0)
    return out


def passage_scores(z: np.ndarray, owner: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Eq. 15 for every passage: ``scale_j · Σ_{π(i)=j} z_i``."""
    sums = np.bincount(owner, weights=z, minlength=scale.shape[0])
    return sums * scale


def rank_passages(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best passages, ties by stored passage order (lower index first)."""
    return top_k_indices(scores, k)


def passage_best(u: np.ndarray, owner: np.ndarray, n_passages: int) -> np.ndarray:
    """t_j = max_{i: π(i) = j} u_i, the question similarity of passage j's best proposition
    (0 for passages without propositions; u ≥ 0 by Eq. 6). ``owner`` must be ascending, as
    the index stores propositions (by passage, then ordinal): one ``maximum.reduceat``."""
    best = np.zeros(n_passages, dtype=np.float64)
    if owner.size == 0:
        return best
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    best[owner[starts]] = np.maximum.reduceat(np.asarray(u, dtype=np.float64), starts)
    return best


def rank_with_tail(scores: np.ndarray, tail: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best passages: positive ``scores`` first (descending), then the rest by
    ``tail`` (descending); ties by stored passage order in both parts."""
    pos = np.flatnonzero(scores > 0)
    head = pos[top_k_indices(scores[pos], k)]
    if head.size >= k:
        return head
    rest = np.flatnonzero(scores <= 0)
    return np.concatenate([head, rest[top_k_indices(tail[rest], k - head.size)]])
