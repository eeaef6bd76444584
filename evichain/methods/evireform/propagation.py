"""Propagation through shared entities (paper §3.7, Eq. 12–14), sparse operations only.

With the binary incidence A (M × N_e) and entity degrees D_e = diag(Aᵀ1):

* Eq. 12  W = A D_e⁺ Aᵀ − diag(A D_e⁺ Aᵀ), applied as
  W x = A (D_e⁺ (Aᵀ x)) − d ⊙ x with d_i = Σ_e A_ie / deg_e (the self-loop weight);
* Eq. 13  T = W D_w⁺ with D_w = diag(W 1) (row sums, computed as W applied to 1);
  T s = W (D_w⁺ s): each column of T sums to 1 where deg_w > 0 (column-normalised);
* Eq. 14  z = α s + (1 − α) T s; with ``steps`` > 1 the update repeats on z
  (z_{t+1} = α s + (1 − α) T z_t), the paper uses one step.

Pseudo-inverses assign 0 to zero degrees (paper C.1): a proposition without entities, or
whose entities occur nowhere else, receives and transfers no mass. No M × M matrix is built:
each product costs O(nnz(A)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from evichain.retrieval.incidence import binarize, pinv_diag

__all__ = ["EntityPropagator", "dense_reference", "pinv_diag"]


@dataclass(frozen=True)
class EntityPropagator:
    """Precomputed sparse factors of Eq. 12–13 for one incidence matrix.

    Attributes:
        A: The binary incidence (M × N_e).
        At: Aᵀ, stored as CSR for the products Aᵀ x.
        inv_deg_e: D_e⁺, the pseudo-inverse of the entity degrees (diagonal, as a vector).
        self_loop: d with d_i = Σ_e A_ie / deg_e, the diagonal removed from A D_e⁺ Aᵀ (Eq. 12).
        inv_deg_w: D_w⁺, the pseudo-inverse of the row sums of W (Eq. 13).
    """

    A: sp.csr_matrix
    At: sp.csr_matrix
    inv_deg_e: np.ndarray
    self_loop: np.ndarray
    inv_deg_w: np.ndarray

    @classmethod
    def from_incidence(cls, A: sp.spmatrix) -> "EntityPropagator":
        """Build from a binary (M × N_e) incidence; duplicates count once."""
        A = binarize(A)
        At = A.T.tocsr()
        inv_deg_e = pinv_diag(np.asarray(A.sum(axis=0)).ravel())
        self_loop = A @ inv_deg_e
        partial = cls(A, At, inv_deg_e, self_loop, np.zeros(A.shape[0]))
        row_sums = partial.apply_w(np.ones(A.shape[0]))
        return cls(A, At, inv_deg_e, self_loop, pinv_diag(row_sums))

    def apply_w(self, x: np.ndarray) -> np.ndarray:
        """W x (Eq. 12) without forming W."""
        return self.A @ (self.inv_deg_e * (self.At @ x)) - self.self_loop * x

    def apply_t(self, s: np.ndarray) -> np.ndarray:
        """T s = W D_w⁺ s (Eq. 13)."""
        return self.apply_w(self.inv_deg_w * s)

    def propagate(self, s: np.ndarray, alpha: float, steps: int = 1) -> np.ndarray:
        """z = α s + (1 − α) T s (Eq. 14), repeated ``steps`` times on z."""
        s = np.asarray(s, dtype=np.float64)
        z = s
        for _ in range(steps):
            z = alpha * s + (1.0 - alpha) * self.apply_t(z)
        return z

    @property
    def row_sums(self) -> np.ndarray:
        """D_w (the row sums of W), recovered from its pseudo-inverse where positive."""
        return pinv_diag(self.inv_deg_w)


def dense_reference(A: np.ndarray, s: np.ndarray, alpha: float, steps: int = 1) -> np.ndarray:
    """Eq. 12–14 with dense matrices, for tests on small inputs only."""
    A = (np.asarray(A) > 0).astype(np.float64)
    G = A @ np.diag(pinv_diag(A.sum(axis=0))) @ A.T
    W = G - np.diag(np.diag(G))
    T = W @ np.diag(pinv_diag(W.sum(axis=1)))
    z = np.asarray(s, dtype=np.float64)
    for _ in range(steps):
        z = alpha * s + (1 - alpha) * T @ z
    return z
