"""EviReform equations on a hand-built 3-passage index (Eq. 6–15), sparse vs dense
propagation, the paper's fallbacks (C.1) and params validation.

The index (d = 3, M = 6 propositions, N = 3 passages, 3 entities):

    prop  passage  h_i              entities
    p0    d0       (1, 0, 0)        e0
    p1    d0       (0.6, 0.8, 0)    e1
    p2    d1       (0, 1, 0)        e0, e1
    p3    d2       (0, 0, 1)        e1
    p4    d2       (0.8, 0, 0.6)    e2
    p5    d2       (-1, 0, 0)       —

Question h_q = (1, 0, 0); residual query h_ρ = (0, 0.6, 0.8).
"""

from __future__ import annotations

import json
from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from evichain.config import LLMParams, ParamsError, parse_params
from evichain.llm import LLMCache, LLMClient
from evichain.llm.scripted import set_responder
from evichain.methods.evireform.index import build_index
from evichain.methods.evireform.llm_steps import EviReformLLM
from evichain.methods.evireform.params import EviReformParams
from evichain.methods.evireform.propagation import EntityPropagator, dense_reference, pinv_diag
from evichain.methods.evireform.readout import passage_scores, rank_passages, readout_scale
from evichain.methods.evireform.retrieve import (EviReformRetriever, clean_queries,
                                                 clean_selection, combine_signals, first_distinct,
                                                 proposition_scores, residual_signal, seed_vector,
                                                 top_positive)
from evichain.methods.evireform.variants import variant_params

H = np.array([[1, 0, 0], [0.6, 0.8, 0], [0, 1, 0], [0, 0, 1], [0.8, 0, 0.6], [-1, 0, 0]],
             dtype=np.float32)
OWNER = ["d0", "d0", "d1", "d2", "d2", "d2"]
ENTITIES = {0: ["e0"], 1: ["e1"], 2: ["e0", "e1"], 3: ["e1"], 4: ["e2"], 5: []}
HQ = np.array([1, 0, 0], dtype=np.float32)
HRHO = np.array([0, 0.6, 0.8], dtype=np.float32)

# Expected values, derived by hand (fractions).
U = [F(1), F(3, 5), F(0), F(0), F(4, 5), F(0)]                      # Eq. 6
B = [F(5, 8), F(3, 8), 0, 0, 0, 0]                                  # Eq. 7–8, S = {p0, p1}
R = [0, 0, F(3, 7), F(4, 7), 0, 0]                                  # Eq. 10, I = {p3, p2}
S = [b / 2 + r / 2 for b, r in zip(B, R)]                           # Eq. 11, β = 1/2
DW = [F(1, 2), F(2, 3), F(7, 6), F(2, 3), F(0), F(0)]              # row sums of W (Eq. 12–13)
W = {(0, 2): F(1, 2), (1, 2): F(1, 3), (1, 3): F(1, 3), (2, 3): F(1, 3)}


def _w(i: int, j: int) -> F:
    return W.get((min(i, j), max(i, j)), F(0))


X = [s / d if d else F(0) for s, d in zip(S, DW)]                   # D_w⁺ s
TS = [sum((_w(i, j) * X[j] for j in range(6)), F(0)) for i in range(6)]   # Eq. 13
Z = [s / 2 + t / 2 for s, t in zip(S, TS)]                          # Eq. 14, α = 1/2
SCORES = [(Z[0] + Z[1]) / np.sqrt(2), Z[2] / 1.0, (Z[3] + Z[4] + Z[5]) / np.sqrt(3)]  # Eq. 15


def _floats(xs: list[F] | list[object]) -> np.ndarray:
    return np.array([float(x) for x in xs])


def tiny_index(passage_format: str = "{title}\n{text}"):  # type: ignore[no-untyped-def]
    corpus = pd.DataFrame({"passage_id": ["d0", "d1", "d2"], "title": ["T0", "T1", "T2"],
                           "text": ["zero", "one", "two"]})
    props = pd.DataFrame({"prop_id": [f"{OWNER[i]}#{i}" for i in range(6)], "passage_id": OWNER,
                          "text": [f"prop {i}" for i in range(6)],
                          "entities": [ENTITIES[i] for i in range(6)], "extractor": "sentences"})
    entities = pd.DataFrame({"entity_id": ["e0", "e1", "e2"]})
    incidence = pd.DataFrame([(f"{OWNER[i]}#{i}", e) for i in range(6) for e in ENTITIES[i]],
                             columns=["prop_id", "entity_id"])
    return build_index(corpus, props, entities, incidence, H, passage_format)


class Script:
    """Scripted LLM: answers by prompt (system text), counts calls per prompt."""

    def __init__(self, **answers: object) -> None:
        self.answers = answers
        self.calls: dict[str, int] = {}
        self.seen: list[list[dict]] = []

    def __call__(self, messages: list[dict], model: str) -> str:
        system = messages[0]["content"]
        kind = ("select" if system.startswith("You compile") else
                "reformulate" if system.startswith("Given a question") else
                "judge" if system.startswith("You judge") else
                "gaps" if system.startswith("You are a bounded") else "other")
        self.calls[kind] = self.calls.get(kind, 0) + 1
        self.seen.append(messages)
        answer = self.answers[kind]
        return answer(messages) if callable(answer) else str(answer)


def scripted_llm(tmp_path: Path, params: EviReformParams, script: Script) -> EviReformLLM:
    set_responder(script)
    client = LLMClient(LLMParams(model="scripted/evireform", backoff_base_s=0.0, max_retries=0),
                       cache=LLMCache(tmp_path / "cache.sqlite"))
    return EviReformLLM(client, params)


def encoder(mapping: dict[str, np.ndarray]):  # type: ignore[no-untyped-def]
    return lambda texts: np.stack([mapping[t] for t in texts]).astype(np.float32)


# --------------------------------------------------------------------------- each equation
def test_eq6_scores_and_candidates() -> None:
    u = proposition_scores(H, HQ)
    np.testing.assert_allclose(u, _floats(U), atol=1e-7)
    assert top_positive(u, 100).tolist() == [0, 4, 1]            # positives only, by score
    assert top_positive(u, 2).tolist() == [0, 4]


def test_eq7_8_seed_and_eq9_observed() -> None:
    u = proposition_scores(H, HQ)
    np.testing.assert_allclose(seed_vector(u, [0, 1]), _floats(B), atol=1e-7)
    assert seed_vector(u, [0, 1]).sum() == pytest.approx(1.0)
    assert first_distinct(np.array([0, 0, 1, 2, 2, 2]), [0, 1], 20) == [0]   # E_q = {d0}


def test_eq10_residual_signal() -> None:
    u_rho = proposition_scores(H, HRHO)
    r, retained = residual_signal(u_rho, 2)
    assert retained.tolist() == [3, 2]
    np.testing.assert_allclose(r, _floats(R), atol=1e-7)
    assert residual_signal(np.zeros(6), 2)[0] is None           # no positive similarity: invalid


def test_eq11_combination() -> None:
    s, fallback = combine_signals(_floats(B), [_floats(R)], 0.5)
    np.testing.assert_allclose(s, _floats(S), atol=1e-12)
    assert not fallback
    only_r, _ = combine_signals(_floats(B), [_floats(R)], 0.5, residual_only=True)
    np.testing.assert_allclose(only_r, _floats(R))
    mean, _ = combine_signals(_floats(B), [_floats(R), np.eye(6)[5]], 0.25)
    np.testing.assert_allclose(mean, 0.25 * _floats(B) + 0.75 * (_floats(R) + np.eye(6)[5]) / 2)


def test_eq12_14_propagation_by_hand() -> None:
    prop = tiny_index().propagator
    np.testing.assert_allclose(prop.self_loop, [0.5, 1 / 3, 5 / 6, 1 / 3, 1.0, 0.0])
    np.testing.assert_allclose(prop.row_sums, _floats(DW), atol=1e-12)
    np.testing.assert_allclose(prop.apply_t(_floats(S)), _floats(TS), atol=1e-12)
    np.testing.assert_allclose(prop.propagate(_floats(S), 0.5), _floats(Z), atol=1e-12)
    # T is column-normalised: all of s sits on propositions with D_w > 0, so mass is kept
    assert prop.apply_t(_floats(S)).sum() == pytest.approx(1.0)
    # isolated p4 (only a degree-1 entity) and p5 (no entity) neither send nor receive mass
    assert prop.apply_t(np.eye(6)[4]).sum() == 0.0 and prop.apply_t(np.ones(6))[5] == 0.0


def test_eq15_readout_and_ties() -> None:
    index = tiny_index()
    scale = readout_scale(index.n_props, "sqrt")
    np.testing.assert_allclose(scale, [1 / np.sqrt(2), 1.0, 1 / np.sqrt(3)])
    scores = passage_scores(_floats(Z), index.owner, scale)
    np.testing.assert_allclose(scores, [float(x) for x in SCORES], atol=1e-12)
    assert readout_scale(np.array([0, 4]), "sqrt").tolist() == [0.0, 0.5]
    assert readout_scale(np.array([0, 4]), "mean").tolist() == [0.0, 0.25]
    assert rank_passages(np.array([0.2, 0.5, 0.2, 0.5]), 4).tolist() == [1, 3, 0, 2]


def test_pinv_zero_degree() -> None:
    assert pinv_diag(np.array([0.0, 2.0, 0.5])).tolist() == [0.0, 0.5, 2.0]


# --------------------------------------------------------------------------- sparse vs dense
@pytest.mark.parametrize("steps,alpha", [(1, 0.5), (1, 0.25), (3, 0.75)])
def test_sparse_propagation_matches_dense(steps: int, alpha: float) -> None:
    rng = np.random.default_rng(7)
    A = (rng.random((120, 30)) < 0.06).astype(float)
    A[:5] = 0.0                                         # propositions without entities
    A[:, 0] = 0.0
    A[10:60, 0] = 1.0                                   # one very frequent entity
    s = rng.random(120) * (rng.random(120) < 0.2)
    s /= s.sum()
    sparse = EntityPropagator.from_incidence(sp.csr_matrix(A)).propagate(s, alpha, steps)
    np.testing.assert_allclose(sparse, dense_reference(A, s, alpha, steps), atol=1e-12)


def test_propagation_scales_without_dense_matrix() -> None:
    """M = 200k propositions: a dense M × M matrix (320 GB) is impossible, sparse is instant."""
    rng = np.random.default_rng(0)
    m, ne, nnz = 200_000, 40_000, 600_000
    rows = np.concatenate([rng.integers(0, m, nnz), np.arange(m)])   # + one entity (column 0)
    cols = np.concatenate([rng.integers(1, ne, nnz), np.zeros(m, dtype=np.int64)])  # in every row
    A = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(m, ne))
    prop = EntityPropagator.from_incidence(A)
    s = np.zeros(m)
    s[rng.integers(0, m, 20)] = 0.05
    z = prop.propagate(s, 0.5)
    assert z.shape == (m,) and np.isfinite(z).all()
    assert z.sum() == pytest.approx(s.sum())


# --------------------------------------------------------------------------- whole chain + fallbacks
def test_steps_1_to_7_on_the_hand_built_index(tmp_path: Path) -> None:
    params = EviReformParams()
    script = Script(select='{"selected_proposition_ids": [1, 0, 99, 0]}',
                    reformulate='{"queries": ["bridge", " ", "BRIDGE"]}')
    llm = scripted_llm(tmp_path, params, script)
    index = tiny_index()
    result = EviReformRetriever(index, params, llm, encoder({"bridge": HRHO})).retrieve(
        "q1", "question?", HQ, gold=["d1", "d2"])
    t = result.trace
    assert t["candidate_ids"] == ["d0#0", "d2#4", "d0#1"]
    assert t["selected_ids"] == ["d0#0", "d0#1"] and t["selected_ranks"] == [1, 3]
    assert t["n_invalid_ids"] == 1 and not t["selection_fallback"]
    assert t["observed_passage_ids"] == ["d0"]
    assert t["residual_queries"] == ["bridge"] and t["n_valid_residual"] == 1
    assert t["retained_residual_prop_ids"] == ["d2#3", "d1#2"] and not t["residual_fallback"]
    assert [r[2] for r in result.rows] == list(np.array(["d0", "d1", "d2"])[np.argsort(
        [-float(x) for x in SCORES], kind="stable")])
    np.testing.assert_allclose([r[3] for r in result.rows], sorted(map(float, SCORES), reverse=True))
    assert t["c0_passage_ids"] == ["d0", "d2"] and t["cplus_passage_ids"] == ["d0", "d2", "d1"]
    assert (t["c0_gold"], t["cplus_gold"], t["c0_complete"], t["cplus_complete"]) == (1, 2, False, True)
    assert t["gold_selected"] == 0 and t["gold_in_candidates"] == 1
    assert t["sel_prompt_tokens"] > 0 and t["ref_prompt_tokens"] > 0
    sent = json.loads(script.seen[0][1]["content"])
    assert sent == {"q": "question?", "c": [{"i": 0, "t": "prop 0"}, {"i": 4, "t": "prop 4"},
                                            {"i": 1, "t": "prop 1"}]}


def test_invalid_selection_falls_back_to_highest_positive(tmp_path: Path) -> None:
    params = EviReformParams(reformulation=False)
    script = Script(select='{"selected_proposition_ids": [5, 77]}')   # 5 has u = 0: not a candidate
    llm = scripted_llm(tmp_path, params, script)
    t = EviReformRetriever(tiny_index(), params, llm, encoder({})).retrieve("q", "q?", HQ).trace
    assert t["selection_fallback"] and t["selected_ids"] == ["d0#0"]
    assert t["selection_status"] == "llm_invalid_schema"
    assert script.calls["select"] == 2                                  # one repair, then failure


def test_empty_selection_and_malformed_json_fall_back(tmp_path: Path) -> None:
    for answer in ('{"selected_proposition_ids": []}', "not json at all"):
        llm = scripted_llm(tmp_path / answer[:3], EviReformParams(), Script(
            select=answer, reformulate='{"queries": []}'))
        t = EviReformRetriever(tiny_index(), EviReformParams(), llm, encoder({})).retrieve(
            "q", "q?", HQ).trace
        assert t["selection_fallback"] and t["selected_ids"] == ["d0#0"]
        assert t["residual_fallback"] and t["residual_queries"] == []   # no valid query: s = b


def test_residual_query_without_positive_match_falls_back_to_b(tmp_path: Path) -> None:
    params = EviReformParams(propagation=False)
    llm = scripted_llm(tmp_path, params, Script(select='{"selected_proposition_ids": [0]}',
                                                reformulate='{"queries": ["nothing"]}'))
    negative = np.array([0, -1, 0], dtype=np.float32)          # h_iᵀh_ρ ≤ 0 for every i
    retr = EviReformRetriever(tiny_index(), params, llm, encoder({"nothing": negative}))
    t = retr.retrieve("q", "q?", HQ).trace
    assert t["residual_queries"] == ["nothing"] and t["n_valid_residual"] == 0
    assert t["residual_fallback"] and t["retained_residual_prop_ids"] == []


def test_cleaning_helpers() -> None:
    assert clean_selection([3, 3, 9, 1], np.array([1, 3]), 12) == ([3, 1], 1)
    assert clean_selection([1, 3], np.array([1, 3]), 1) == ([1], 0)
    assert clean_queries(["  a  b ", "A B", "", "c", "d"], 2) == ["a b", "c"]


# --------------------------------------------------------------------------- params
def test_params_errors_name_the_key() -> None:
    with pytest.raises(ParamsError, match=r"evireform\.alphaa"):
        parse_params({"evireform": {"alphaa": 0.3}})
    with pytest.raises(ParamsError, match=r"evireform\.k_r"):
        parse_params({"evireform": {"k_r": 0}})
    with pytest.raises(ParamsError, match=r"evireform\.residual_only requires evireform\.reformulation"):
        parse_params({"evireform": {"residual_only": True, "reformulation": False}})
    with pytest.raises(ParamsError, match=r"evireform\.rounds"):
        parse_params({"evireform": {"rounds": 4}})
    with pytest.raises(ParamsError, match="unknown EviReform variant"):
        parse_params({"evireform_variants": ["ful"]})
    defaults = EviReformParams()
    assert (defaults.n_candidates, defaults.max_selected, defaults.max_residual_queries, defaults.k_r,
            defaults.alpha, defaults.beta, defaults.propagation_steps, defaults.readout,
            defaults.rounds) == (100, 12, 3, 2, 0.5, 0.5, 1, "sqrt", 1)


def test_variants_are_switches_of_one_block() -> None:
    p = EviReformParams(alpha=0.25, k_r=4)
    base = variant_params(p, "base")
    assert not base.reformulation and not base.propagation and base.alpha == 0.25 and base.k_r == 4
    assert variant_params(p, "full") == p
    assert variant_params(p, "rounds3").rounds == 3
    assert variant_params(p, "reorder").reorder
    with pytest.raises(ParamsError, match="unknown EviReform variant"):
        variant_params(p, "nope")
