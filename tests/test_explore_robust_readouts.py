"""The readouts of scripts/explore_robust_readouts.py on the Lothair toy index: the
passage–entity graph is the symmetric bipartite graph of the index, the PPR readout moves
mass from a seeded passage to the passages that share its entities (more than to those two
hops away), and the dense prior adds nothing when both weights are 0."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.test_evireform_retrieve import index

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("explore_robust_readouts",
                                                  ROOT / "scripts" / "explore_robust_readouts.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_graph_is_the_symmetric_passage_entity_incidence(script) -> None:  # type: ignore[no-untyped-def]
    idx = index()
    W = script.passage_entity_graph(idx)
    n_e = idx.A.shape[1]
    assert W.shape == (n_e + idx.n_passages,) * 2
    assert (W != W.T).nnz == 0
    B = W[n_e:, :n_e].toarray()
    for j in range(idx.n_passages):  # passage j links exactly the entities of its propositions
        expected = idx.A[np.flatnonzero(idx.owner == j)].toarray().any(axis=0)
        assert np.array_equal(B[j] > 0, expected)


def test_ppr_readout_reaches_the_entity_neighbour(script) -> None:  # type: ignore[no-untyped-def]
    idx = index()
    W = script.passage_entity_graph(idx)
    n_e = idx.A.shape[1]
    score = np.zeros(idx.n_passages)
    score[0] = 1.0  # all reset mass on passage d0
    q = script.Stored("q", np.zeros(idx.n_propositions), score, np.zeros(idx.n_passages), [])
    final = script.ppr_readout(idx, W, 0.5, 0.0, 0.0)(q)
    linked = np.flatnonzero((W[n_e:, :n_e] @ W[:n_e, n_e + 0]).toarray().ravel() > 0)
    linked = linked[linked != 0]
    unlinked = np.setdiff1d(np.arange(1, idx.n_passages), linked)
    assert final[0] == pytest.approx(1.0)
    assert linked.size and (final[linked] > 0).all()
    assert final[linked].min() > final[unlinked].max()  # two hops get less than one


def test_dense_prior_with_zero_weights_is_the_readout(script) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    D = rng.normal(size=(5, 3))
    score = np.array([0.0, 2.0, 1.0, 0.0, 4.0])
    q = script.Stored("q", np.zeros(2), score, np.zeros(5), ["x"])
    out = script.dense_readout(D, {"q": rng.normal(size=3)}, {"q": rng.normal(size=5)}, 0.0, 0.0)(q)
    assert np.allclose(out, score / 4.0)
