"""CEE variant ``robust`` (ours): bridge-title pool expansion, LLM-free sentence facets and the
coverage gain normalised by |P(q)|; and the paper-faithful variants unchanged by the new params
(params, runs and traces pinned to the values the code gave before they existed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from evichain.config import EmbedParams, LLMParams, OrchestrationParams, ParamsError, parse_params
from evichain.io import read_json, read_parquet
from evichain.llm import LLMCache, LLMClient
from evichain.llm.scripted import set_responder
from evichain.methods.cee.bridge import BridgeIndex, inherit_scores
from evichain.methods.cee.explore import ExploreLLM
from evichain.methods.cee.facets import (Passage, neighbour_max_similarity,
                                         select_sentence_facets, sentence_facets)
from evichain.methods.cee.params import VARIANTS, CEEParams, FacetParams, variant_params
from evichain.methods.cee.retrieve import CEERetriever, rank_pool
from evichain.methods.cee.scoring import FacetBank
from evichain.methods.cee.selection import coverage_gain, final_ranking, greedy_select
from tests.methods.cee.test_cee_facets import PASSAGES, fake_encode, write_fixture
from tests.methods.cee.test_cee_retrieve import PARAMS, QUESTION, Explore, retriever

FAITHFUL = ("full", "no_coverage", "no_contrastive", "no_sequential")
NEW_KEYS = {"bridge_expansion", "bridge_max_per_round", "bridge_scan", "coverage_normalise",
            "bridge_inherit"}
NEW_FACET_KEYS = {"source", "sentence_facets"}


# --------------------------------------------------------------------------- params
def test_new_params_default_to_the_paper_and_robust_sets_them() -> None:
    p = CEEParams()
    assert (p.bridge_expansion, p.bridge_max_per_round, p.bridge_scan, p.coverage_normalise) == \
        (False, 10, "summary", False)
    assert (p.facets.source, p.facets.sentence_facets) == ("llm", 3)
    custom = CEEParams(rounds=3, facets=FacetParams(n_neighbours=7, max_pairs_per_passage=2))
    for v in FAITHFUL:
        s = variant_params(custom, v)
        assert {k: getattr(s, k) for k in NEW_KEYS} == {k: getattr(p, k) for k in NEW_KEYS}
        assert s.facets == custom.facets
    assert variant_params(custom, "full") == custom
    robust = variant_params(custom, "robust")
    assert robust.bridge_expansion and robust.coverage_normalise
    assert robust.facets.source == "sentences"
    # the nested facets block is merged key by key: the other facet settings are kept
    assert robust.facets.n_neighbours == 7 and robust.facets.max_pairs_per_passage == 2
    assert robust.rounds == 3 and robust.coverage and robust.contrastive and robust.sequential
    assert set(VARIANTS) == {*FAITHFUL, "robust"}


def test_faithful_variants_dump_no_other_change() -> None:
    """Apart from the new keys (at their defaults) the variants' settings are as before."""
    before = {"full": {}, "no_coverage": {"coverage": False},
              "no_contrastive": {"contrastive": False}, "no_sequential": {"sequential": False}}
    for v, switches in before.items():
        dump = variant_params(PARAMS, v).model_dump()
        expect = {**PARAMS.model_dump(), **switches}
        assert dump == expect
        assert NEW_KEYS <= set(dump) and NEW_FACET_KEYS <= set(dump["facets"])


@pytest.mark.parametrize("raw, key", [
    ({"bridge_max_per_round": 0}, "cee.bridge_max_per_round"),
    ({"bridge_scan": "everything"}, "cee.bridge_scan"),
    ({"coverage_normalise": "maybe"}, "cee.coverage_normalise"),
    ({"facets": {"source": "oracle"}}, "cee.facets.source"),
    ({"facets": {"sentence_facets": 0}}, "cee.facets.sentence_facets"),
])
def test_bad_values_name_the_key(raw: dict[str, Any], key: str) -> None:
    with pytest.raises(ParamsError, match=key.replace(".", r"\.")):
        parse_params({"cee": raw})
    with pytest.raises(ValidationError, match=key.split(".")[-1]):
        CEEParams.model_validate(raw)


# --------------------------------------------------------------------------- bridge expansion
BRIDGE_CORPUS = [
    ("b0", "Alpha Station", "Alpha Station was built by Zephyr Corporation near Ra. Alpha Station "
                            "opened in 1990."),
    ("b1", "Zephyr Corporation", "Quentin Marlowe started it in Oslo."),
    ("b2", "Ra", "Ra is a river."),
    ("b3", "Omega Tower", "Omega Tower was built in 1970 by Alpha Station engineers."),
    ("b4", "Oslo", "Oslo is the capital of Norway."),
    ("b5", "zephyr corporation", "A second passage with the same title, in lower case."),
]


def bridge_passages() -> list[Passage]:
    return [Passage(*p) for p in BRIDGE_CORPUS]


def test_title_matcher_links_exactly_the_named_passages() -> None:
    index = BridgeIndex(bridge_passages())
    # b0 names "Zephyr Corporation" (two passages carry it) and "Ra" (< 4 characters: never);
    # its own title "Alpha Station" occurs in its text and is excluded
    assert index.linked(0) == [1, 5]
    assert index.linked(1) == [4]                          # "Oslo"
    assert index.linked(2) == [] and index.linked(4) == []
    assert index.linked(3) == [0]                          # "Alpha Station"
    assert index.linked(5) == []                           # its own title only


def test_expand_orders_by_question_similarity_ties_by_corpus_order_and_caps() -> None:
    index = BridgeIndex(bridge_passages())
    E = np.zeros((6, 3))
    E[1], E[5], E[4], E[0] = [1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]
    q = np.array([0.0, 1.0, 0.0])
    # scanned b0 and b1: candidates b1, b5 (from b0), b4 (from b1); b1 is already in the pool
    assert index.expand([0, 1], {0, 1}, q, E, cap=10) == [4, 5]
    assert index.expand([0, 1], {0, 1}, q, E, cap=1) == [4]
    q_tie = np.array([1.0, 0.0, 0.0])                      # b1 and b5 tie: lower row first
    assert index.expand([0], {0}, q_tie, E, cap=1) == [1]
    assert index.expand([0], {0, 1, 5}, q_tie, E, cap=5) == []


class Bridge:
    """Scripted model for the bridge corpus: round-1 probe names the first hop only."""

    def __call__(self, messages: list[dict[str, Any]], model: str) -> str:
        system = messages[0]["content"]
        if system.startswith("You plan searches"):
            return json.dumps({"probes": ["Alpha Station builder"]})
        if system.startswith("You summarize"):
            return json.dumps({"summary": "Alpha Station was built in 1990."})
        return json.dumps({"probes": ["Alpha Station opening year"]})


def bridge_retriever(tmp_path: Path, params: CEEParams) -> CEERetriever:
    passages = bridge_passages()
    E = fake_encode([f"{p.title}\n{p.text}" for p in passages])
    client = LLMClient(LLMParams(model="scripted/cee-bridge", backoff_base_s=0.0, max_retries=0),
                       cache=LLMCache(tmp_path / "llm.sqlite"))
    bank = FacetBank.build([], np.zeros((0, E.shape[1])), len(passages))
    return CEERetriever(E, passages, bank, params, ExploreLLM(client, params), fake_encode)


BRIDGE_PARAMS = CEEParams(k_cand=1, k_final=2, top_k=6, rounds=2, summary_max_passages=1)
QB = "Who started the company that built Alpha Station?"


def test_bridge_expansion_adds_the_second_hop_to_the_pool(tmp_path: Path) -> None:
    set_responder(Bridge())
    full = bridge_retriever(tmp_path, variant_params(BRIDGE_PARAMS, "full"))
    plain = full.explorer.run(QB)
    assert plain.pool == [0] and plain.pool_sizes == [1, 1]          # b0 only, both rounds
    no_bridge = full.retrieve("q", QB, ["b0", "b1"]).trace
    assert "bridge_added" not in no_bridge and no_bridge["gold_in_pool"] == 1
    robust = bridge_retriever(tmp_path, variant_params(BRIDGE_PARAMS, "robust"))
    ex = robust.explorer.run(QB)
    # round 1 scans b0 → b1 and b5 (same title); round 2 scans b0 again: nothing new
    assert ex.pool == [0, 1, 5] and ex.pool_sizes == [3, 3]
    t = robust.retrieve("q", QB, ["b0", "b1"]).trace
    assert t["bridge_added"] == 2 and t["bridge_ids"] == ["b1", "b5"]
    assert t["bridge_rounds"] == [1, 1] and t["gold_in_pool"] == 2
    capped = bridge_retriever(tmp_path, BRIDGE_PARAMS.model_copy(
        update={"bridge_expansion": True, "bridge_max_per_round": 1}))
    t1 = capped.retrieve("q", QB, ["b0", "b1"]).trace
    assert t1["bridge_added"] == 2 and t1["bridge_rounds"] == [1, 2]   # one per round
    assert t1["pool_sizes"] == [2, 3]
    # the LLM calls are those of `full` (the summary sees the same passages)
    assert t["probes"] == no_bridge["probes"] and t["summaries"] == no_bridge["summaries"]


def test_bridge_scan_retrieved_reads_every_passage_of_the_round(tmp_path: Path) -> None:
    set_responder(Bridge())
    params = BRIDGE_PARAMS.model_copy(update={"bridge_expansion": True, "k_cand": 2,
                                              "summary_max_passages": 1, "rounds": 1})
    summary_only = bridge_retriever(tmp_path, params).explorer.run(QB)
    everything = bridge_retriever(
        tmp_path, params.model_copy(update={"bridge_scan": "retrieved"})).explorer.run(QB)
    assert set(summary_only.pool) <= set(everything.pool)
    assert len(everything.bridge_rows) >= len(summary_only.bridge_rows)


def test_expand_with_sources_names_the_first_scanned_passage_that_links() -> None:
    index = BridgeIndex(bridge_passages())
    E = np.zeros((6, 3))
    E[1], E[5], E[4], E[0] = [1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]
    q = np.array([0.0, 1.0, 0.0])
    # b3 names b0; b0 names b1 and b5; b1 names b4: sources follow the scan order
    assert index.expand_with_sources([3, 0, 1], {3}, q, E, cap=10) == [(4, 1), (0, 3), (1, 0), (5, 0)]
    assert index.expand([3, 0, 1], {3}, q, E, cap=10) == [4, 0, 1, 5]


def test_inherit_scores_by_hand() -> None:
    """s′(d) = max(s(d), γ · s′(src(d))), in the order the bridges were added."""
    rows = [2, 5, 7, 9]
    s = np.array([0.8, 0.1, 0.5, 0.0])
    # 5 named by 2 (0.5 · 0.8 = 0.4 > 0.1); 9 named by 5 (0.5 · 0.4 = 0.2 > 0.0, a chain);
    # 7 named by 2 (0.4 < 0.5: kept); 11 not in the pool: ignored
    out = inherit_scores(s, rows, [5, 9, 7, 11], [2, 5, 2, 2], 0.5)
    assert out.tolist() == pytest.approx([0.8, 0.4, 0.5, 0.2])
    assert s.tolist() == [0.8, 0.1, 0.5, 0.0]                          # input untouched
    assert inherit_scores(s, rows, [5, 9], [2, 5], 0.0).tolist() == s.tolist()
    assert inherit_scores(s, rows, [], [], 1.0).tolist() == s.tolist()


def test_bridge_inherit_lifts_the_second_hop_and_is_inert_without_bridges(tmp_path: Path) -> None:
    set_responder(Bridge())
    params = variant_params(BRIDGE_PARAMS, "robust")
    r = bridge_retriever(tmp_path, params)
    ex = r.explorer.run(QB)
    assert ex.pool == [0, 1, 5] and ex.bridge_rows == [1, 5] and ex.bridge_sources == [0, 0]
    off = rank_pool(ex.probe_vectors, r.E, r.bank, ex.pool, params, ex.bridge_rows, ex.bridge_sources)
    on = rank_pool(ex.probe_vectors, r.E, r.bank, ex.pool,
                   params.model_copy(update={"bridge_inherit": 0.9}), ex.bridge_rows, ex.bridge_sources)
    s0, s1, s5 = off.pool.s
    assert s0 > s1 and s0 > s5                                  # the second hop scored below b0
    assert on.pool.s.tolist() == pytest.approx([s0, max(s1, 0.9 * s0), max(s5, 0.9 * s0)])
    trace = bridge_retriever(tmp_path, params.model_copy(update={"bridge_inherit": 0.9})).retrieve(
        "q", QB, ["b0", "b1"]).trace
    assert trace["bridge_source_ids"] == ["b0", "b0"]
    # a paper variant has no bridge passages: γ changes nothing
    full = variant_params(BRIDGE_PARAMS, "full")
    a = bridge_retriever(tmp_path, full).retrieve("q", QB, ["b0", "b1"])
    b = bridge_retriever(tmp_path, full.model_copy(update={"bridge_inherit": 1.0})).retrieve(
        "q", QB, ["b0", "b1"])
    assert a.rows == b.rows and a.trace == b.trace


# --------------------------------------------------------------------------- sentence facets
def test_neighbour_max_similarity_and_lowest_m_selection_by_hand() -> None:
    """Passage 0 = x, its nearest neighbour passage 1 = (x + y)/√2, passage 2 = z.

    Sentences of passage 0 (m = max cos to the neighbour's passage embedding):
    s0 = (x+y)/√2 → 1; s1 = z → 0; s2 = x → 0.7071; s3 = z → 0 (ties s1).
    """
    r = 1 / np.sqrt(2)
    E = np.array([[1, 0, 0], [r, r, 0], [0, 0, 1]], dtype=float)
    V = np.array([[r, r, 0], [0, 0, 1], [1, 0, 0], [0, 0, 1], [0, 0, 1]], dtype=float)
    owner = np.array([0, 0, 0, 0, 2])
    position = np.array([0, 1, 2, 3, 0])
    neighbours = np.array([[1], [0], [0]])
    m = neighbour_max_similarity(V, owner, E, neighbours, block=2)
    assert m[:4] == pytest.approx([1.0, 0.0, r, 0.0])
    assert m[4] == pytest.approx(0.0)                                 # z vs passage 0 = x
    assert select_sentence_facets(owner, position, m, 1).tolist() == [1, 4]        # tie: s1
    assert select_sentence_facets(owner, position, m, 2).tolist() == [1, 3, 4]
    assert select_sentence_facets(owner, position, m, 3).tolist() == [1, 2, 3, 4]
    assert select_sentence_facets(owner, position, m, 4).tolist() == [0, 1, 2, 3, 4]


def test_sentence_facets_encode_title_sentence_and_keep_the_distinctive_ones() -> None:
    passages = [Passage("p0", "Anna", "Anna sang. Anna danced. Anna slept."),
                Passage("p1", "Bert", "Bert sang."),
                Passage("p2", "Carl", "")]
    vec = {"Anna: Anna sang.": [0, 1, 0], "Anna: Anna danced.": [0, 0, 1],
           "Anna: Anna slept.": [0.6, 0.8, 0], "Bert: Bert sang.": [0, 1, 0]}
    seen: list[list[str]] = []

    def encode(texts: list[str]) -> np.ndarray:
        seen.append(list(texts))
        return np.array([vec[t] for t in texts], dtype=float)

    E = np.array([[1, 0, 0], [0, 1, 0], [0.8, 0.6, 0]], dtype=float)
    logs: list[str] = []
    out = sentence_facets(passages, E, n_neighbours=1, m=2, encode=encode,
                          log=lambda fmt, *a: logs.append(fmt % a))
    assert seen == [list(vec)]                                   # one batch, "<title>: <sentence>"
    # p0's nearest neighbour is p2 = (0.8, 0.6, 0): m = 0.6, 0, 0.96 → keep "danced", "sang"
    assert out.texts == ["Anna: Anna sang.", "Anna: Anna danced.", "Bert: Bert sang."]
    assert out.owner.tolist() == [0, 0, 1]
    assert out.vectors.tolist() == [[0, 1, 0], [0, 0, 1], [0, 1, 0]]
    assert out.info == {"source": "sentences", "n_neighbours": 1, "sentence_facets": 2,
                        "passages": 3, "sentences": 4, "facets": 3, "passages_with_facets": 2}
    assert any("3 facets for 2 of 3 passages" in line for line in logs)
    bank = FacetBank.build(out.owner.tolist(), out.vectors, 3)
    assert bank.count.tolist() == [2, 1, 0]


# --------------------------------------------------------------------------- coverage normalised
def test_normalised_gain_is_the_raw_gain_over_the_number_of_probes() -> None:
    rng = np.random.default_rng(0)
    g = rng.uniform(-0.2, 1.0, size=(5, 7))
    gamma = rng.uniform(0.0, 0.6, size=5)
    assert coverage_gain(g, gamma, normalise=True) == pytest.approx(coverage_gain(g, gamma) / 5)
    assert coverage_gain(g[:0], gamma[:0], normalise=True).tolist() == [0.0] * 7


def test_normalising_stops_the_coverage_term_swamping_s() -> None:
    """4 probes. d0: s = 0.9, g = (0.9, 0, 0, 0); d1: s = 0.5, g = 0.4 on every probe.
    Raw: u(d0) = 0.9 + 0.9 = 1.8 < u(d1) = 0.5 + 1.6 = 2.1. Normalised: 0.9 + 0.225 = 1.125 >
    0.5 + 0.4 = 0.9."""
    s = np.array([0.9, 0.5])
    g = np.array([[0.9, 0.4], [0.0, 0.4], [0.0, 0.4], [0.0, 0.4]])
    raw = greedy_select(s, g, 1)
    norm = greedy_select(s, g, 1, normalise=True)
    assert raw.order == [1] and raw.utility == pytest.approx([2.1])
    assert norm.order == [0] and norm.utility == pytest.approx([1.125])
    assert final_ranking(s, g, 1, 2, normalise=True)[0] == [0, 1]
    assert final_ranking(s, g, 1, 2)[0] == [1, 0]


# --------------------------------------------------------------------------- faithful runs pinned
PINNED = {  # rows of q3 with next probes Teutberga / Tours Loire / Erstein Alsace, before the change
    "full": [("d3", 1.6393136745318029), ("d5", 1.0327955074456754), ("d4", 0.9999999996805852),
             ("d0", 0.5000000144991914), ("d2", 0.49236595716889364)],
    "no_coverage": [("d3", 0.5547001960072832), ("d5", 0.5163977494331795),
                    ("d0", 0.5000000144991914), ("d4", 0.5000000082377207),
                    ("d2", 0.49236595716889364)],
}


@pytest.mark.parametrize("variant", sorted(PINNED))
def test_faithful_runs_are_unchanged(tmp_path: Path, variant: str) -> None:
    set_responder(Explore(next_probes=[["Teutberga"], ["Tours Loire"], ["Erstein Alsace"]]))
    res = retriever(tmp_path, variant_params(PARAMS, variant)).retrieve("q3", QUESTION, ["d1"])
    assert [r[2] for r in res.rows] == [pid for pid, _ in PINNED[variant]]
    assert [r[3] for r in res.rows] == pytest.approx([s for _, s in PINNED[variant]], abs=1e-12)
    assert not any(k.startswith("bridge") for k in res.trace)
    assert res.trace["pool_sizes"] == [2, 4, 5, 6]


# --------------------------------------------------------------------------- flow and stage
@pytest.fixture
def fake_embeddings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake encoder for the one retrieval flow (``flows.method``: bulk in the flow thread,
    the embedder inside tasks)."""
    from tests.methods.cee.test_cee_facets import _FakeEmbedder
    import flows.method

    monkeypatch.setattr(flows.method, "encode_all", lambda texts, *a, **k: fake_encode(list(texts)))
    monkeypatch.setattr(flows.method, "get_embedder", lambda embed: _FakeEmbedder())


def test_robust_flow_builds_sentence_facets_without_facets_parquet(
        tmp_path: Path, fake_embeddings: None) -> None:
    from flows.cee import facets_path
    from flows.method import retrieval_flow

    paths = write_fixture(tmp_path / "artifacts")
    assert not facets_path(paths).exists()
    set_responder(Explore())
    params = parse_params({}).model_copy(update={
        "cee": PARAMS, "llm": LLMParams(model="scripted/flow-robust", backoff_base_s=0.0),
        "embed": EmbedParams(), "orchestration": OrchestrationParams(max_workers=2)})
    out = retrieval_flow(paths, "cee", "robust", params, stage="retrieve_cee-robust")
    facets = out.summary["facets"]
    assert facets["source"] == "sentences" and facets["passages"] == len(PASSAGES)
    assert facets["passages_with_facets"] == len(PASSAGES)            # every passage has text
    assert {"bridge_added", "bridge_ids", "bridge_rounds"} <= set(out.trace.columns)
    assert out.summary["bridge_added"] == int(out.trace["bridge_added"].sum())
    assert (out.trace["n_pool_with_facets"] == out.trace["pool_size"]).all()
    assert out.run.groupby("question_id").size().max() <= PARAMS.top_k


def test_robust_stage_runs_without_facets_parquet(tmp_path: Path, fake_embeddings: None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from stages.retrieve_method import app as retrieve_app

    write_fixture(tmp_path / "artifacts")
    monkeypatch.chdir(tmp_path)
    cfg = {"llm": {"model": "scripted/stage-robust", "backoff_base_s": 0.0},
           "cee": {"k_cand": 2, "k_final": 3, "top_k": 5,
                   "facets": {"n_neighbours": 2, "max_pairs_per_passage": 1}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(cfg))
    set_responder(Explore())
    out = CliRunner().invoke(retrieve_app, ["--dataset", "fx", "--method", "cee", "--variant", "robust"])
    assert out.exit_code == 0, out.output
    usage = read_json("artifacts/fx/usage/retrieve_cee-robust.json")
    assert usage["variant"] == "robust" and usage["facets"]["source"] == "sentences"
    assert usage["facets"]["n_neighbours"] == 2
    trace = read_parquet("artifacts/fx/traces/cee-robust.parquet")
    assert "bridge_added" in trace.columns and len(trace) == 2
    # a faithful variant still needs facets.parquet
    bad = CliRunner().invoke(retrieve_app, ["--dataset", "fx", "--method", "cee", "--variant", "full"])
    assert bad.exit_code != 0


def test_rank_pool_applies_coverage_normalise() -> None:
    from evichain.methods.cee.retrieve import rank_pool
    from evichain.methods.cee.scoring import score_pool

    rng = np.random.default_rng(1)
    E = rng.normal(size=(8, 4))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    P = E[[0, 3, 5, 6, 7]] + 0.3 * rng.normal(size=(5, 4))
    P /= np.linalg.norm(P, axis=1, keepdims=True)
    bank = FacetBank.build([], np.zeros((0, 4)), 8)
    pool = list(range(8))
    params = CEEParams(k_final=4, top_k=8, coverage_normalise=True)
    sc = score_pool(P, E, *bank.gather(np.zeros(0, dtype=np.int64)), 0.5, 0.5, True)
    want = final_ranking(sc.s, sc.g, 4, 8, normalise=True)
    got = rank_pool(P, E, bank, pool, params)
    assert got.rows == want[0] and got.scores == pytest.approx(want[1])
    raw = final_ranking(sc.s, sc.g, 4, 8)
    assert rank_pool(P, E, bank, pool, CEEParams(k_final=4, top_k=8)).scores == pytest.approx(raw[1])
    assert want[1] != pytest.approx(raw[1])


def test_robust_only_stage_needs_no_llm_facets_and_stays_off_cee_datasets() -> None:
    """``retrieve_cee_robust`` / ``evaluate_cee_robust`` (CEE robust on datasets without the
    paper's facet index) run the robust variant, declare no ``facets.parquet`` /
    ``generate_facets`` dep, and name no dataset of ``cee_datasets`` (whose matrix stages write
    the same ``cee-robust`` outputs)."""
    root = Path(__file__).resolve().parents[3]
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    cee_datasets = set(yaml.safe_load((root / "params.yaml").read_text())["cee_datasets"])
    for name in ("retrieve_cee_robust", "evaluate_cee_robust"):
        stage = stages[name]
        assert "--variant robust" in stage["cmd"], name
        # the facet table and its stage, not the code (evichain/methods/cee/facets.py builds the
        # sentence facets of the robust variant itself)
        artifacts = [str(d) for d in stage["deps"] if str(d).startswith("artifacts/")]
        assert not any("facet" in d for d in artifacts), name
        assert "stages/generate_facets.py" not in stage["deps"], name
        assert set(stage["matrix"]["dataset"]) and not set(stage["matrix"]["dataset"]) & cee_datasets
