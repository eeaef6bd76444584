"""Contrastive evidence refinement (paper §2.3.3, Eq. 2–6), vectorised over probes × candidates
× facets with numpy (float64).

Shapes: P (n_p × dim) probe embeddings φ(p); D (n_d × dim) candidate embeddings φ(d);
F (n_d × M × dim) the candidates' facet embeddings φ(c_d^m) padded to M = max_d M_d, with a
boolean mask (n_d × M) of real facets. All embeddings are L2-normalised, so sim = dot product.

Passages without facets (C_d = ∅; the paper does not discuss them): the sum of Eq. 4 is empty,
so b_{p,d} = 0, h̃_{p,d} = φ(d) and g(p, d) = sim(p, d) — the refinement leaves them at their
base similarity. This module implements exactly that reading.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FacetBank:
    """Facet embeddings grouped by passage (corpus row order): passage j owns rows
    ``start[j] : start[j] + count[j]`` of ``vectors``."""

    vectors: np.ndarray
    start: np.ndarray
    count: np.ndarray

    @classmethod
    def build(cls, owner: Sequence[int], vectors: np.ndarray, n_passages: int) -> "FacetBank":
        """From each facet's passage row index (any order) and its embedding."""
        owner_arr = np.asarray(owner, dtype=np.int64)
        order = np.argsort(owner_arr, kind="stable")
        count = np.bincount(owner_arr, minlength=n_passages).astype(np.int64)
        start = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64)
        vecs = np.asarray(vectors, dtype=np.float64)
        if vecs.ndim != 2 or vecs.shape[0] != owner_arr.shape[0]:
            raise ValueError(f"facet vectors {vecs.shape} do not match {owner_arr.shape[0]} owners")
        return cls(vecs[order], start, count)

    def gather(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(F, mask): the padded facet tensor (n_d × M × dim) and its mask for passage ``rows``."""
        counts = self.count[rows]
        width = int(counts.max()) if counts.size else 0
        dim = self.vectors.shape[1]
        if width == 0:
            return np.zeros((len(rows), 0, dim)), np.zeros((len(rows), 0), dtype=bool)
        offs = np.arange(width)
        mask = offs[None, :] < counts[:, None]
        ix = np.where(mask, self.start[rows][:, None] + offs[None, :], 0)
        return self.vectors[ix] * mask[..., None], mask


def base_scores(P: np.ndarray, D: np.ndarray) -> np.ndarray:
    """sim(p, d) = φ(p)ᵀφ(d) for every probe and candidate (n_p × n_d)."""
    return np.asarray(P, dtype=np.float64) @ np.asarray(D, dtype=np.float64).T


def s_base(sim: np.ndarray) -> np.ndarray:
    """Eq. 2: s_base(d) = max_p sim(p, d)."""
    return sim.max(axis=0)


def facet_weights(P: np.ndarray, F: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Eq. 3: w_{p,d}^(m) = softmax over the facets m of d of sim(p, c_d^m) (n_p × n_d × M).

    Padding gets weight 0; a passage without facets has all-zero weights (empty sum).
    """
    if F.shape[1] == 0:
        return np.zeros((P.shape[0], F.shape[0], 0))
    return _masked_softmax(np.einsum("pk,dmk->pdm", np.asarray(P, dtype=np.float64), F), mask)


def facet_representation(w: np.ndarray, F: np.ndarray) -> np.ndarray:
    """Eq. 4: b_{p,d} = Σ_m w_{p,d}^(m) φ(c_d^m) (n_p × n_d × dim)."""
    return np.einsum("pdm,dmk->pdk", w, F)


def refined_representation(D: np.ndarray, b: np.ndarray, alpha: float) -> np.ndarray:
    """h̃_{p,d} = norm(φ(d) + α b_{p,d}) (n_p × n_d × dim), ℓ2 over the last axis."""
    h = np.asarray(D, dtype=np.float64)[None] + alpha * b
    norm = np.linalg.norm(h, axis=2, keepdims=True)
    return np.divide(h, norm, out=np.zeros_like(h), where=norm > 0)


def refined_scores_explicit(P: np.ndarray, D: np.ndarray, F: np.ndarray, mask: np.ndarray,
                            alpha: float) -> np.ndarray:
    """g(p, d) = φ(p)ᵀ h̃_{p,d} (n_p × n_d), literally via Eq. 3, Eq. 4 and h̃ (materialises
    the n_p × n_d × dim tensors b and h̃; the reference for :func:`refined_scores`)."""
    b = facet_representation(facet_weights(P, F, mask), F)
    h = refined_representation(D, b, alpha)
    return np.einsum("pk,pdk->pd", np.asarray(P, dtype=np.float64), h)


def refined_scores(P: np.ndarray, D: np.ndarray, F: np.ndarray, mask: np.ndarray,
                   alpha: float) -> np.ndarray:
    """g(p, d) = φ(p)ᵀ h̃_{p,d} (n_p × n_d) without materialising b or h̃ (same algebra).

    With w = Eq. 3 weights, S_pm = sim(p, c_d^m), G_d = facet Gram matrix, u_dm = φ(d)ᵀφ(c_d^m):
    φ(p)ᵀ(φ(d) + α b) = sim(p, d) + α Σ_m w_m S_pm and
    ‖φ(d) + α b‖² = ‖φ(d)‖² + 2α Σ_m w_m u_dm + α² wᵀ G_d w;  g = the first over the root of the
    second. Only matrix products over dim (BLAS) and products over the M facets remain.
    """
    P64, D64 = np.asarray(P, dtype=np.float64), np.asarray(D, dtype=np.float64)
    sim = P64 @ D64.T
    dd = np.einsum("dk,dk->d", D64, D64)
    if F.shape[1] == 0:
        return sim / np.sqrt(dd)[None]
    n_d, M, dim = F.shape
    S = (P64 @ F.reshape(n_d * M, dim).T).reshape(P64.shape[0], n_d, M)
    w = _masked_softmax(S, mask)
    u = np.matmul(F, D64[:, :, None])[:, :, 0]                       # n_d × M
    G = np.matmul(F, F.transpose(0, 2, 1))                           # n_d × M × M
    wT = w.transpose(1, 0, 2)                                        # n_d × n_p × M
    quad = np.einsum("dpm,dpm->dp", np.matmul(wT, G), wT).T          # n_p × n_d
    norm2 = dd[None] + 2.0 * alpha * np.einsum("pdm,dm->pd", w, u) + alpha ** 2 * quad
    num = sim + alpha * np.einsum("pdm,pdm->pd", w, S)
    return num / np.sqrt(np.maximum(norm2, 1e-300))


def _masked_softmax(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Softmax over the last axis where ``mask`` (broadcast over probes); 0 elsewhere."""
    masked = np.where(mask[None], logits, -np.inf)
    peak = masked.max(axis=2, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    expo = np.where(mask[None], np.exp(masked - peak), 0.0)
    total = expo.sum(axis=2, keepdims=True)
    return np.divide(expo, total, out=np.zeros_like(expo), where=total > 0)


def s_con(g: np.ndarray) -> np.ndarray:
    """Eq. 5: s_con(d) = max_p g(p, d)."""
    return g.max(axis=0)


def combined_scores(base: np.ndarray, con: np.ndarray, beta: float) -> np.ndarray:
    """Eq. 6: s(d) = β s_base(d) + (1 − β) s_con(d)."""
    return beta * base + (1.0 - beta) * con


@dataclass(frozen=True)
class PoolScores:
    """Scores of one candidate pool: sim and g (n_p × n_d), s_base, s_con and s (n_d)."""

    sim: np.ndarray
    g: np.ndarray
    base: np.ndarray
    con: np.ndarray
    s: np.ndarray


def score_pool(P: np.ndarray, D: np.ndarray, F: np.ndarray, mask: np.ndarray, alpha: float,
               beta: float, contrastive: bool = True) -> PoolScores:
    """Eq. 2–6 for a pool. Without contrastive refinement (Table 2 ablation) g = sim, so
    s = s_base whatever β."""
    sim = base_scores(P, D)
    g = refined_scores(P, D, F, mask, alpha) if contrastive else sim
    base, con = s_base(sim), s_con(g)
    s = combined_scores(base, con, beta) if contrastive else base
    return PoolScores(sim=sim, g=g, base=base, con=con, s=s)
