"""CEE Eq. 2–8 on hand-built 3-d examples with numbers worked out by hand, and the vectorised
code against a plain loop over probes × candidates × facets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evichain.methods.cee.scoring import (FacetBank, facet_representation, facet_weights,
                                          refined_scores, score_pool)
from evichain.methods.cee.selection import (coverage_gain, coverage_state, final_ranking,
                                            greedy_select)

X, Y, Z = np.eye(3)


def bank(facets: dict[int, list[np.ndarray]], n: int) -> FacetBank:
    owner = [d for d, cs in facets.items() for _ in cs]
    vecs = np.array([c for cs in facets.values() for c in cs]).reshape(len(owner), 3)
    return FacetBank.build(owner, vecs, n)


def test_eq3_to_eq6_by_hand() -> None:
    """p = x, d = (0.6, 0.8, 0), facets c1 = x, c2 = z, α = β = 0.5.

    Eq. 3: w = softmax(1, 0) = (e/(e+1), 1/(e+1)) = (0.731059, 0.268941).
    Eq. 4: b = 0.731059·x + 0.268941·z.
    h̃ = norm(d + 0.5 b) = norm(0.965529, 0.8, 0.134471), ‖·‖ = 1.261083 → g = 0.765635.
    Eq. 2: s_base = 0.6; Eq. 5: s_con = 0.765635; Eq. 6: s = 0.5·0.6 + 0.5·0.765635 = 0.682818.
    """
    P, D = X[None], np.array([[0.6, 0.8, 0.0]])
    F, mask = bank({0: [X, Z]}, 1).gather(np.array([0]))
    w = facet_weights(P, F, mask)
    assert w[0, 0] == pytest.approx([math.e / (math.e + 1), 1 / (math.e + 1)])
    assert w[0, 0] == pytest.approx([0.731059, 0.268941], abs=1e-6)
    assert facet_representation(w, F)[0, 0] == pytest.approx([0.731059, 0.0, 0.268941], abs=1e-6)
    scores = score_pool(P, D, F, mask, alpha=0.5, beta=0.5)
    assert scores.g[0, 0] == pytest.approx(0.765635, abs=1e-6)
    assert scores.base[0] == pytest.approx(0.6)
    assert scores.con[0] == pytest.approx(0.765635, abs=1e-6)
    assert scores.s[0] == pytest.approx(0.682818, abs=1e-6)


def test_passage_without_facets_keeps_its_base_similarity() -> None:
    """C_d = ∅: b = 0, h̃ = φ(d), g = sim (mixed with a passage that has facets: padding)."""
    P = np.array([X, Y])
    D = np.array([[0.6, 0.8, 0.0], [0.8, 0.0, 0.6]])
    F, mask = bank({0: [X, Z]}, 2).gather(np.array([0, 1]))
    assert mask.tolist() == [[True, True], [False, False]]
    g = refined_scores(P, D, F, mask, alpha=0.5)
    assert g[:, 1] == pytest.approx([0.8, 0.0])
    assert facet_weights(P, F, mask)[:, 1].sum() == 0.0


def test_max_over_probes_eq2_eq5() -> None:
    P = np.array([X, Y])
    D = np.array([[0.6, 0.8, 0.0]])
    F, mask = bank({0: [X]}, 1).gather(np.array([0]))
    scores = score_pool(P, D, F, mask, alpha=0.5, beta=0.5)
    assert scores.base[0] == pytest.approx(0.8)                    # max(0.6, 0.8)
    # h̃ = norm((0.6, 0.8, 0) + 0.5·x) = (1.1, 0.8, 0)/1.360147 for both probes (one facet: w = 1)
    assert scores.g[:, 0] == pytest.approx([1.1 / math.hypot(1.1, 0.8), 0.8 / math.hypot(1.1, 0.8)])
    assert scores.con[0] == pytest.approx(1.1 / math.hypot(1.1, 0.8))


def test_facets_reorder_passages_with_equal_base_similarity() -> None:
    """Two passages equally similar to the probe; the one whose facet matches the probe wins."""
    P = np.array([[0.8, 0.6, 0.0]])
    D = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    F, mask = bank({0: [Z], 1: [Y]}, 2).gather(np.array([0, 1]))
    scores = score_pool(P, D, F, mask, alpha=0.5, beta=0.5)
    assert scores.base[0] == scores.base[1]
    assert scores.s[1] > scores.s[0]
    off = score_pool(P, D, F, mask, alpha=0.5, beta=0.5, contrastive=False)
    assert off.s.tolist() == off.base.tolist() and off.g.tolist() == off.sim.tolist()


def test_greedy_picks_the_uncovered_probe_over_a_higher_scoring_redundant_passage() -> None:
    """Probes x, y; g = sim (refinement off). d1 = x (s 1.0), d2 = (0.8, 0, 0.6) (s 0.8, serves
    the same probe as d1), d3 = (0, 0.6, 0.8) (s 0.6, the only support of probe y).

    Pick 1 (γ = 0): utilities 1+1 = 2.0, 0.8+0.8 = 1.6, 0.6+0.6 = 1.2 → d1; γ = (1, 0).
    Pick 2: d2: 0.8 + max(0, 0.8−1) + 0 = 0.8; d3: 0.6 + 0 + max(0, 0.6−0) = 1.2 → d3 ≻ d2.
    """
    P = np.array([X, Y])
    D = np.array([X, [0.8, 0.0, 0.6], [0.0, 0.6, 0.8]])
    F, mask = FacetBank.build([], np.zeros((0, 3)), 3).gather(np.arange(3))
    scores = score_pool(P, D, F, mask, alpha=0.5, beta=0.5, contrastive=False)
    assert scores.s == pytest.approx([1.0, 0.8, 0.6])
    gamma = coverage_state(scores.g, [0])
    assert gamma == pytest.approx([1.0, 0.0])
    assert coverage_gain(scores.g, gamma) == pytest.approx([0.0, 0.0, 0.6])
    sel = greedy_select(scores.s, scores.g, 3)
    assert sel.order == [0, 2, 1]
    assert sel.utility == pytest.approx([2.0, 1.2, 0.8])
    assert final_ranking(scores.s, scores.g, 3, 3, coverage=False)[0] == [0, 1, 2]


def test_final_ranking_picks_then_rest_by_s_with_non_increasing_scores() -> None:
    rng = np.random.default_rng(0)
    P = _unit(rng.normal(size=(4, 8)))
    D = _unit(rng.normal(size=(30, 8)))
    F, mask = _random_bank(rng, 30, 8).gather(np.arange(30))
    scores = score_pool(P, D, F, mask, alpha=0.5, beta=0.5)
    order, run_scores = final_ranking(scores.s, scores.g, 5, 12)
    sel = greedy_select(scores.s, scores.g, 5)
    assert order[:5] == sel.order and len(order) == 12 and len(set(order)) == 12
    rest = [i for i in np.argsort(-scores.s, kind="stable") if i not in sel.order][:7]
    assert order[5:] == [int(i) for i in rest]
    assert all(a >= b - 1e-12 for a, b in zip(run_scores, run_scores[1:]))


def test_greedy_ties_go_to_the_passage_stored_first() -> None:
    s = np.array([0.5, 0.5, 0.5])
    g = np.array([[0.5, 0.5, 0.5]])
    assert greedy_select(s, g, 3).order == [0, 1, 2]


def test_vectorised_scores_match_a_plain_loop() -> None:
    rng = np.random.default_rng(7)
    n_p, n_d, dim, alpha, beta = 5, 12, 6, 0.5, 0.5
    P, D = _unit(rng.normal(size=(n_p, dim))), _unit(rng.normal(size=(n_d, dim)))
    fb = _random_bank(rng, n_d, dim)
    F, mask = fb.gather(np.arange(n_d))
    scores = score_pool(P, D, F, mask, alpha, beta)
    for d in range(n_d):
        C = fb.vectors[fb.start[d]:fb.start[d] + fb.count[d]]
        g = []
        for p in range(n_p):
            if len(C):
                e = np.exp(C @ P[p])
                b = (e / e.sum()) @ C
            else:
                b = np.zeros(dim)
            h = D[d] + alpha * b
            g.append(P[p] @ (h / np.linalg.norm(h)))
        assert scores.g[:, d] == pytest.approx(g)
        assert scores.s[d] == pytest.approx(beta * max(P @ D[d]) + (1 - beta) * max(g))


def test_facet_bank_groups_unsorted_owners() -> None:
    fb = FacetBank.build([2, 0, 2], np.array([X, Y, Z]), 4)
    assert fb.count.tolist() == [1, 0, 2, 0]
    F, mask = fb.gather(np.array([2, 1]))
    assert F.shape == (2, 2, 3) and mask.tolist() == [[True, True], [False, False]]
    assert F[0].tolist() == [X.tolist(), Z.tolist()]


def _unit(a: np.ndarray) -> np.ndarray:
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def _random_bank(rng: np.random.Generator, n: int, dim: int) -> FacetBank:
    counts = rng.integers(0, 4, size=n)
    owner = [d for d in range(n) for _ in range(counts[d])]
    return FacetBank.build(owner, _unit(rng.normal(size=(len(owner), dim))), n)


def test_fast_refined_scores_equal_the_literal_equations() -> None:
    from evichain.methods.cee.scoring import refined_scores_explicit

    rng = np.random.default_rng(3)
    P, D = _unit(rng.normal(size=(6, 10))), _unit(rng.normal(size=(20, 10)))
    F, mask = _random_bank(rng, 20, 10).gather(np.arange(20))
    for alpha in (0.0, 0.5, 2.0):
        assert refined_scores(P, D, F, mask, alpha) == pytest.approx(
            refined_scores_explicit(P, D, F, mask, alpha), abs=1e-12)
