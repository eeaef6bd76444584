"""Personalized PageRank over a weighted sparse graph (HippoRAG 2 §3, CatRAG, PropRAG).

For a weight matrix W (W[i, j] = weight of the arc i → j; an undirected graph is a symmetric
W), reset vector r (normalised to sum 1) and damping d:

    p = (1 − d)·r + d·(Pᵀ p + (Σ_{i dangling} p_i)·r),   P = D⁻¹W (row-stochastic),

i.e. the walker follows an out-arc with probability d (chosen in proportion to its weight) or
jumps back to the seeds with probability 1 − d; a node without out-weight (dangling) jumps to
the seeds. This is what igraph's PRPACK ``personalized_pagerank`` and networkx's ``pagerank``
(``dangling=None``) compute; the originals call the igraph one with damping 0.5.

Two interchangeable backends:

* :func:`ppr_igraph`: igraph PRPACK on a directed graph with one arc per stored entry of W
  (CSR order), so per-question weight changes (CatRAG) are a new weight list, not a new graph;
* :func:`ppr_power`: vectorised sparse power iteration (any number of reset columns at once),
  stopping when the L1 change is below ``tol``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp


def _normalise_reset(reset: np.ndarray) -> np.ndarray:
    """Non-negative, NaN-free reset columns summing to 1 (the code zeroes NaN and negatives)."""
    r = np.where(np.isnan(reset) | (reset < 0), 0.0, np.asarray(reset, dtype=np.float64))
    total = r.sum(axis=0)
    if np.any(total <= 0):
        raise ValueError("personalized PageRank needs a reset vector with positive mass")
    return r / total


def transition(W: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray]:
    """Pᵀ (column j = out-distribution of node j) and the dangling-node mask."""
    out = np.asarray(W.sum(axis=1)).ravel()
    inv = np.divide(1.0, out, out=np.zeros_like(out), where=out > 0)
    return (sp.diags(inv) @ W).T.tocsr(), out <= 0


def ppr_power(W: sp.csr_matrix, reset: np.ndarray, damping: float, tol: float = 1e-10,
              max_iter: int = 1000, PT: tuple[sp.csr_matrix, np.ndarray] | None = None) -> np.ndarray:
    """PPR by power iteration (module docstring); ``reset`` may be n or n × b (b questions).
    ``PT`` = a precomputed :func:`transition` of W."""
    r = _normalise_reset(reset)
    PTm, dangling = PT if PT is not None else transition(W)
    p = r.copy()
    for _ in range(max_iter):
        leaked = p[dangling].sum(axis=0)
        nxt = (1.0 - damping) * r + damping * (PTm @ p + leaked * r)
        if np.abs(nxt - p).sum() < tol:
            return nxt
        p = nxt
    return p


def igraph_graph(W: sp.csr_matrix) -> Any:
    """A directed igraph graph with one arc per stored entry of W, in CSR order."""
    import igraph as ig

    W = W.tocsr()
    rows = np.repeat(np.arange(W.shape[0]), np.diff(W.indptr))
    return ig.Graph(n=W.shape[0], edges=np.column_stack([rows, W.indices]).tolist(), directed=True)


def ppr_igraph(graph: Any, weights: np.ndarray, reset: np.ndarray, damping: float) -> np.ndarray:
    """PPR with igraph PRPACK; ``weights`` aligned with the graph's arcs (CSR order of W)."""
    r = _normalise_reset(reset)
    scores = graph.personalized_pagerank(damping=damping, directed=True, weights=weights.tolist(),
                                         reset=r.tolist(), implementation="prpack")
    return np.asarray(scores, dtype=np.float64)


@dataclass
class PPR:
    """PPR over one fixed sparsity pattern W; :meth:`run` takes optional per-arc multipliers
    (aligned with ``W.data``) so a question can reweight arcs without copying the graph."""

    W: sp.csr_matrix
    backend: Literal["igraph", "power"] = "igraph"
    tol: float = 1e-10
    max_iter: int = 1000
    _graph: Any = field(default=None, init=False, repr=False)
    _PT: tuple[sp.csr_matrix, np.ndarray] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.W = self.W.tocsr()
        self.W.sort_indices()
        if self.backend == "igraph":
            self._graph = igraph_graph(self.W)
        else:
            self._PT = transition(self.W)

    def run(self, reset: np.ndarray, damping: float, scale: np.ndarray | None = None) -> np.ndarray:
        """Stationary PPR scores of every node."""
        if self.backend == "igraph":
            weights = self.W.data if scale is None else self.W.data * scale
            return ppr_igraph(self._graph, weights, reset, damping)
        if scale is None:
            return ppr_power(self.W, reset, damping, self.tol, self.max_iter, self._PT)
        W = sp.csr_matrix((self.W.data * scale, self.W.indices, self.W.indptr), shape=self.W.shape)
        return ppr_power(W, reset, damping, self.tol, self.max_iter)


def run_ppr(W: sp.csr_matrix, reset: np.ndarray, damping: float, backend: str,
            tol: float = 1e-10, max_iter: int = 1000) -> np.ndarray:
    """One-off PPR on ``W`` (e.g. a per-question subgraph) with the chosen backend."""
    if backend == "igraph":
        W = W.tocsr()
        W.sort_indices()
        return ppr_igraph(igraph_graph(W), W.data, reset, damping)
    return ppr_power(W.tocsr(), reset, damping, tol, max_iter)


def arc_index(W: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Positions in ``W.data`` of the arcs (rows[k] → cols[k]); −1 where W has no such arc.
    ``W`` must have sorted indices."""
    out = np.full(len(rows), -1, dtype=np.int64)
    for k, (i, j) in enumerate(zip(rows, cols)):
        lo, hi = W.indptr[i], W.indptr[i + 1]
        pos = lo + np.searchsorted(W.indices[lo:hi], j)
        if pos < hi and W.indices[pos] == j:
            out[k] = pos
    return out
