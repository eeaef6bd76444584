"""Personalized PageRank: igraph PRPACK and the sparse power iteration against networkx (and a
dense closed-form reference) on small weighted graphs, undirected and directed, with dangling
nodes, zero-weight arcs, several reset columns and per-arc multipliers."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from evichain.methods.graph.ppr import PPR, arc_index, ppr_power, run_ppr

UNDIRECTED = [(0, 1, 2.0), (1, 2, 1.0), (2, 3, 3.0), (3, 0, 0.5), (1, 4, 1.5), (4, 5, 1.0), (2, 5, 2.0)]
DIRECTED = [(0, 1, 1.0), (1, 2, 2.0), (2, 0, 1.0), (2, 3, 3.0), (4, 0, 1.0), (1, 3, 0.0), (5, 4, 2.0)]


def matrix(edges: list[tuple[int, int, float]], n: int, symmetric: bool) -> sp.csr_matrix:
    rows = [a for a, b, _ in edges] + ([b for a, b, _ in edges] if symmetric else [])
    cols = [b for a, b, _ in edges] + ([a for a, b, _ in edges] if symmetric else [])
    data = [w for *_, w in edges] * (2 if symmetric else 1)
    return sp.csr_matrix((data, (rows, cols)), shape=(n, n))


def networkx_ppr(W: sp.csr_matrix, reset: np.ndarray, damping: float) -> np.ndarray:
    G = nx.DiGraph()
    G.add_nodes_from(range(W.shape[0]))
    coo = W.tocoo()
    for i, j, w in zip(coo.row, coo.col, coo.data):
        G.add_edge(int(i), int(j), weight=float(w))
    pers = {i: float(x) for i, x in enumerate(reset)}
    p = nx.pagerank(G, alpha=damping, personalization=pers, weight="weight", tol=1e-14, max_iter=10_000)
    return np.array([p[i] for i in range(W.shape[0])])


def dense_reference(W: sp.csr_matrix, reset: np.ndarray, damping: float) -> np.ndarray:
    """p = (1 − d)(I − d·Mᵀ)⁻¹ r, M = row-normalised W with dangling rows replaced by r."""
    A = W.toarray()
    r = reset / reset.sum()
    out = A.sum(axis=1)
    M = np.where(out[:, None] > 0, A / np.where(out > 0, out, 1)[:, None], r[None, :])
    return (1 - damping) * np.linalg.solve(np.eye(len(r)) - damping * M.T, r)


@pytest.mark.parametrize("edges,symmetric", [(UNDIRECTED, True), (DIRECTED, False)])
@pytest.mark.parametrize("damping", [0.5, 0.75, 0.45])
def test_backends_match_networkx_and_closed_form(edges: list, symmetric: bool, damping: float) -> None:
    W = matrix(edges, 6, symmetric)
    reset = np.array([0.3, 0.0, 0.0, 0.05, 0.6, 0.0])
    expected = networkx_ppr(W, reset, damping)
    np.testing.assert_allclose(dense_reference(W, reset, damping), expected, atol=1e-10)
    for backend in ("igraph", "power"):
        got = PPR(W, backend, tol=1e-13).run(reset, damping)
        np.testing.assert_allclose(got, expected, atol=1e-9)
        assert got.sum() == pytest.approx(1.0)
        np.testing.assert_allclose(run_ppr(W, reset, damping, backend, tol=1e-13), expected, atol=1e-9)


def test_reset_is_normalised_and_cleaned() -> None:
    W = matrix(UNDIRECTED, 6, True)
    raw = np.array([3.0, np.nan, -1.0, 0.0, 1.0, 0.0])
    clean = np.array([0.75, 0.0, 0.0, 0.0, 0.25, 0.0])
    np.testing.assert_allclose(PPR(W, "power").run(raw, 0.5), PPR(W, "power").run(clean, 0.5))
    with pytest.raises(ValueError, match="positive mass"):
        PPR(W, "power").run(np.zeros(6), 0.5)


def test_power_iteration_is_vectorised_over_reset_columns() -> None:
    W = matrix(UNDIRECTED, 6, True)
    R = np.eye(6)[:, [0, 4, 5]] + 0.1
    batch = ppr_power(W, R, 0.5, tol=1e-13)
    for k in range(3):
        np.testing.assert_allclose(batch[:, k], networkx_ppr(W, R[:, k], 0.5), atol=1e-9)


def test_per_arc_multipliers_equal_a_reweighted_graph() -> None:
    W = matrix(UNDIRECTED, 6, True)
    PPRi, PPRp = PPR(W, "igraph"), PPR(W, "power", tol=1e-13)
    arcs = arc_index(PPRi.W, np.array([1, 1, 2, 5]), np.array([2, 4, 5, 0]))
    assert arcs[-1] == -1 and (arcs[:3] >= 0).all()                 # 5 → 0 is not an arc
    scale = np.ones(PPRi.W.nnz)
    scale[arcs[:3]] = [4.0, 0.0, 0.3]                                # directed change of 3 arcs
    reweighted = PPRi.W.toarray()
    reweighted[1, 2] *= 4.0
    reweighted[1, 4] = 0.0
    reweighted[2, 5] *= 0.3
    reset = np.array([0.0, 1.0, 0.0, 0.0, 0.0, 0.2])
    expected = networkx_ppr(sp.csr_matrix(reweighted), reset, 0.5)
    np.testing.assert_allclose(PPRi.run(reset, 0.5, scale), expected, atol=1e-9)
    np.testing.assert_allclose(PPRp.run(reset, 0.5, scale), expected, atol=1e-9)
    assert not np.allclose(expected, PPRi.run(reset, 0.5))          # the change matters
