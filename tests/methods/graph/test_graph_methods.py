"""HippoRAG 2, CatRAG and PropRAG on hand-built indexes with hand-set vectors: seeding formulas,
repairs of malformed LLM replies, fallbacks, and final scores checked against networkx PPR on
independently constructed (re)weighted graphs."""

from __future__ import annotations

import json
from pathlib import Path

import litellm
import networkx as nx
import numpy as np
import pandas as pd
import polars as pl
import pytest

from evichain.config import LLMParams
from evichain.llm import LLMCache, LLMClient
from evichain.llm.scripted import set_responder
from evichain.methods.graph.catrag import CatRAGRetriever, key_fact_factors, project_score
from evichain.methods.graph.hipporag2 import HippoRAG2Retriever, build_hippo_index, entity_seed_weights
from evichain.methods.graph.llm import GraphLLM, clean_kept, clean_scores
from evichain.methods.graph.params import GraphParams
from evichain.methods.graph.proprag import BeamSearch, PropRAGRetriever, SearchStats, build_prop_index
from evichain.methods.graph.proprag import Path as PropPath

CORPUS = pl.DataFrame({"passage_id": ["d0", "d1", "d2", "d3"], "title": ["A", "B", "C", "D"],
                       "text": ["A is the son of B.", "B died in 900.", "C is a city. A was born in C.",
                                "D x E."]})
TRIPLES = pd.DataFrame([("d0", "A", "son of", "B"), ("d1", "B", "died in", "900"), ("d2", "C", "is", "city"),
                        ("d2", "A", "born in", "C"), ("d3", "D", "x", "E")],
                       columns=["passage_id", "subject", "predicate", "object"])
ENTITIES = ["900", "a", "b", "c", "city", "d", "e"]
FACTS = [("a", "born in", "c"), ("a", "son of", "b"), ("b", "died in", "900"), ("c", "is", "city"),
         ("d", "x", "e")]
QUESTION = "When did A's father die?"
FACT_COS = [0.2, 0.9, 0.7, 0.1, 0.0]
PASSAGE_COS = [0.5, 0.3, 0.1, 0.2]
DIM = 24


def unit(c: float, axis: int) -> np.ndarray:
    """A unit vector with cosine c to e₀, the rest on ``axis``."""
    v = np.zeros(DIM)
    v[0], v[axis] = c, np.sqrt(1 - c * c)
    return v


def encoder(texts: list[str], label: str) -> np.ndarray:
    if label == "facts":
        return np.stack([unit(c, 1 + k) for k, c in enumerate(FACT_COS)]).astype(np.float32)
    if label == "passages":
        return np.stack([unit(c, 6 + k) for k, c in enumerate(PASSAGE_COS)]).astype(np.float32)
    return np.eye(DIM, dtype=np.float32)[[ENTITIES.index(t) + 9 for t in texts]]   # entities: orthogonal


def phrases(texts: list[str]) -> np.ndarray:
    return encoder([t if t in ENTITIES else "e" for t in texts], "entities")


H_Q = np.eye(DIM)[0]


@pytest.fixture()
def index():  # type: ignore[no-untyped-def]
    idx = build_hippo_index(CORPUS, TRIPLES, encoder, GraphParams(ppr_backend="igraph"))
    assert idx.graph.entity_names == ENTITIES and idx.facts.facts == FACTS
    return idx


def client(tmp_path: Path) -> GraphLLM:
    return GraphLLM(LLMClient(LLMParams(model="scripted/graph", backoff_base_s=0.0, max_retries=0),
                              cache=LLMCache(tmp_path / "llm.sqlite")))


def networkx_ppr(W: np.ndarray, reset: np.ndarray, damping: float) -> np.ndarray:
    G = nx.DiGraph()
    G.add_nodes_from(range(len(W)))
    for i, j in zip(*np.nonzero(W)):
        G.add_edge(int(i), int(j), weight=float(W[i, j]))
    p = nx.pagerank(G, alpha=damping, personalization=dict(enumerate(reset)), weight="weight", tol=1e-14,
                    max_iter=10_000)
    return np.array([p[i] for i in range(len(W))])


def hippo_reset(w_e: dict[str, float]) -> np.ndarray:
    e = np.array([w_e.get(n, 0.0) for n in ENTITIES])
    dense = np.array(PASSAGE_COS)
    return np.concatenate([e, 0.05 * (dense - dense.min()) / (dense.max() - dense.min())])


def filter_reply(ids: list[object]):  # type: ignore[no-untyped-def]
    def respond(messages: list[dict], model: str) -> str:
        system = messages[0]["content"]
        if system.startswith("You filter"):
            return json.dumps({"fact_ids": ids})
        raise AssertionError(system[:40])
    return respond


# --------------------------------------------------------------------------- HippoRAG 2
def test_seed_weights_formula(index) -> None:  # type: ignore[no-untyped-def]
    s = (np.array(FACT_COS) - 0.0) / 0.9
    w = entity_seed_weights(index.facts, [1, 2], s, index.graph.passages_per_entity, top_k=5)
    expected = {"a": 1.0 / 2, "b": (1.0 / 2 + s[2] / 2) / 2, "900": s[2] / 1}
    assert w.tolist() == pytest.approx([expected.get(n, 0.0) for n in ENTITIES])
    top2 = entity_seed_weights(index.facts, [1, 2], s, index.graph.passages_per_entity, top_k=2)
    assert [ENTITIES[i] for i in np.flatnonzero(top2)] == ["900", "a"]


def test_hipporag2_ranks_by_ppr_from_kept_facts(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    set_responder(filter_reply([1, 2, 99, 1, "x"][:4]))
    res = HippoRAG2Retriever(index, GraphParams(), client(tmp_path)).retrieve("q1", QUESTION, H_Q)
    t = res.trace
    assert t["candidate_facts"] == [list(FACTS[i]) for i in (1, 2, 0, 3, 4)]
    assert t["kept_facts"] == [list(FACTS[1]), list(FACTS[2])]
    assert (t["n_unknown_fact_ids"], t["n_duplicate_fact_ids"], t["filter_status"]) == (1, 1, "ok")
    s = (np.array(FACT_COS)) / 0.9
    reset = hippo_reset({"a": 0.5, "b": (0.5 + s[2] / 2) / 2, "900": s[2]})
    expected = networkx_ppr(index.graph.W.toarray(), reset, 0.5)[len(ENTITIES):]
    got = {pid: score for _, _, pid, score in res.rows}
    assert [got[p] for p in CORPUS["passage_id"]] == pytest.approx(expected.tolist(), abs=1e-9)
    assert [r[2] for r in res.rows] == [CORPUS["passage_id"][int(i)] for i in np.argsort(-expected, kind="stable")]
    assert t["prompt_tokens"] > 0 and t["llm_calls"] == 1 and t["status"] == "ok"
    assert res.seconds["compute"] <= res.seconds["total"]
    power = build_hippo_index(CORPUS, TRIPLES, encoder, GraphParams(ppr_backend="power"))
    res_p = HippoRAG2Retriever(power, GraphParams(), client(tmp_path)).retrieve("q1", QUESTION, H_Q)
    assert [r[3] for r in res_p.rows] == pytest.approx([r[3] for r in res.rows], abs=1e-9)


def test_hipporag2_fallbacks_and_failures(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dense_order = ["d0", "d1", "d3", "d2"]
    set_responder(filter_reply([]))                                     # nothing relevant
    empty = HippoRAG2Retriever(index, GraphParams(), client(tmp_path)).retrieve("q", "?", H_Q)
    assert empty.trace["filter_status"] == "empty" and empty.trace["fallback"] == "dense"
    assert [r[2] for r in empty.rows] == dense_order and empty.trace["status"] == "ok"

    def down(messages: list[dict], model: str) -> str:
        raise RuntimeError("server down")
    set_responder(down)
    failed = HippoRAG2Retriever(index, GraphParams(), client(tmp_path / "b")).retrieve("q", "?", H_Q)
    assert failed.trace["status"] == "failed" and failed.trace["failed_step"] == "filter"
    assert failed.trace["filter_status"] == "llm_connection" and failed.trace["fallback"] == "dense"
    assert [r[2] for r in failed.rows] == dense_order
    set_responder(filter_reply([7, 8]))                                 # only unknown ids: repair, then fail
    bogus = HippoRAG2Retriever(index, GraphParams(), client(tmp_path / "c")).retrieve("q", "?", H_Q)
    assert bogus.trace["error_kind"] == "invalid_schema" and bogus.trace["fallback"] == "dense"
    off = GraphParams(hipporag2={"recognition_memory": False})
    no_filter = HippoRAG2Retriever(index, off, None).retrieve("q", "?", H_Q)
    assert no_filter.trace["n_kept"] == 5 and no_filter.trace["llm_calls"] == 0
    assert no_filter.trace["filter_status"] == "off"
    assert clean_kept([3, 3, 9, 1, 2], [1, 2, 3], 2) == ([3, 1], 1, 1)


# --------------------------------------------------------------------------- CatRAG
def test_score_projection_key_fact_factors_and_score_repairs() -> None:
    assert [project_score(s) for s in range(11)] == [0, 0, 0, 0, 0.2, 0.25, 0.3, 2.0, 2.5, 3.0, 5.0]
    f = key_fact_factors(np.arange(2), np.array([True, False]), np.array([1.0, 1.0]), 2.5)
    assert f.tolist() == pytest.approx([2.5 * 2 / 3.5, 2 / 3.5])
    assert (f * 1.0).sum() == pytest.approx(2.0)                       # total preserved
    assert key_fact_factors(np.arange(2), np.array([False, False]), np.ones(2), 2.5).tolist() == [1, 1]
    scores, counts = clean_scores([(1, 8), (1, 2), (5, 9), (2, 12), (3, -1)], [1, 2, 3, 4], 4)
    assert scores == {1: 8, 2: 10, 3: 0, 4: 4}
    assert counts == {"missing": 1, "unknown": 1, "duplicate": 1, "out_of_range": 2}


EDGE_SCORES = {"b": 9, "c": 2, "a": 5, "900": 10}                     # "city": omitted → default 4


def catrag_llm(messages: list[dict], model: str) -> str:
    system = messages[0]["content"]
    data = json.loads(next(m["content"] for m in messages if m["role"] == "user"))  # also on repair
    if system.startswith("You filter"):
        return json.dumps({"fact_ids": [1, 2]})
    if system.startswith("You list the named entities of one question"):
        return json.dumps({"named_entities": ["C", "c", "Nobody"]})
    if system.startswith("You score"):
        scores = [{"id": n["id"], "score": EDGE_SCORES[n["entity"]]} for n in data["neighbours"]
                  if n["entity"] in EDGE_SCORES]
        return json.dumps({"scores": scores + [{"id": 42, "score": 3}]})
    raise AssertionError(system[:40])


def test_catrag_reweights_the_walk(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    set_responder(catrag_llm)
    res = CatRAGRetriever(index, GraphParams(), client(tmp_path), phrases).retrieve("q", QUESTION, H_Q)
    t = res.trace
    assert t["anchor_mentions"] == ["c", "nobody"] and t["anchor_entities"] == ["c", "e"]
    assert t["n_anchor_seeds"] == 2
    assert t["scored_seeds"] == ["900", "a", "b", "c", "e"]
    assert (t["n_missing_scores"], t["n_unknown_score_ids"]) == (2, 4)  # city, d; a bogus id per reply
    # e's only neighbour d gets no valid score: check → repair → failure, d keeps the default 4
    assert (t["n_scoring_calls"], t["n_scoring_failed"], t["llm_calls"]) == (5, 1, 2 + 5)
    assert (t["status"], t["failed_step"], t["error_kind"]) == ("failed", "edge_score", "invalid_schema")
    s = np.array(FACT_COS) / 0.9
    n = len(ENTITIES)
    W = index.graph.W.toarray()
    ix = {e: ENTITIES.index(e) for e in ENTITIES}
    # 1. key facts: a's passage arcs (d0 states a kept fact with a, d2 does not); b, 900 all boosted
    W[ix["a"], n + 0] *= 2.5 * 2 / 3.5
    W[ix["a"], n + 2] *= 2 / 3.5
    # 3. edge factors 2·φ(score) on every arc from a scored seed to a scored target
    factor = {"b": 6.0, "c": 0.0, "a": 0.5, "900": 10.0, "city": 0.4, "d": 0.4}
    for seed in ("900", "a", "b", "c", "e"):
        for target, f in factor.items():
            W[ix[seed], ix[target]] *= f
    reset = hippo_reset({"a": 0.5, "b": (0.5 + s[2] / 2) / 2, "900": s[2], "c": 0.2 / 1, "e": 0.2 / 1})
    expected = networkx_ppr(W, reset, 0.5)[n:]
    got = {pid: score for _, _, pid, score in res.rows}
    assert [got[p] for p in CORPUS["passage_id"]] == pytest.approx(expected.tolist(), abs=1e-9)


def test_catrag_prunes_and_switches(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    set_responder(catrag_llm)
    seen: list[list[str]] = []
    llm = client(tmp_path)
    original = llm.score_edges

    def spy(query, retrieved, entity, neighbours):  # type: ignore[no-untyped-def]
        seen.append([n["entity"] for n in neighbours])
        return original(query, retrieved, entity, neighbours)
    llm.score_edges = spy  # type: ignore[method-assign]
    params = GraphParams(catrag={"max_scored_edges": 1, "symbolic_anchoring": False})
    res = CatRAGRetriever(index, params, llm, phrases).retrieve("q", "?", H_Q)
    assert seen == [["b"], ["b"], ["a"]]                  # 900 → b; a → b (not c); b → a (not 900)
    assert res.trace["n_pruned_edges"] == 2 and res.trace["anchor_status"] == "off"
    off = GraphParams(hipporag2={"recognition_memory": False},
                      catrag={"symbolic_anchoring": False, "edge_weighting": False, "key_fact": False})
    plain = CatRAGRetriever(index, off, None, phrases).retrieve("q", "?", H_Q)
    base = HippoRAG2Retriever(index, off, None).retrieve("q", "?", H_Q)
    assert plain.rows == base.rows                        # every change off = HippoRAG 2


def test_catrag_splits_a_scoring_batch_that_overflows_the_context(index, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def overflowing(messages: list[dict], model: str) -> str:
        data = json.loads(next(m["content"] for m in messages if m["role"] == "user"))
        if messages[0]["content"].startswith("You score") and (
                len(data["neighbours"]) > 1 or data["neighbours"][0]["entity"] == "d"):
            raise litellm.ContextWindowExceededError("maximum context length is 8192 tokens",
                                                     model=model, llm_provider="scripted")
        return catrag_llm(messages, model)

    set_responder(catrag_llm)
    whole = CatRAGRetriever(index, GraphParams(), client(tmp_path / "a"), phrases).retrieve("q", QUESTION, H_Q)
    set_responder(overflowing)
    split = CatRAGRetriever(index, GraphParams(), client(tmp_path / "b"), phrases).retrieve("q", QUESTION, H_Q)
    t = split.trace
    # a (→ b, c), b (→ a, 900), c (→ a, city) overflow once each; 900 → b and e → d are single
    assert (t["n_split_batches"], t["n_scoring_calls"], t["llm_calls"]) == (3, 8, 2 + 8)
    # c → city alone has no valid score (invalid_schema: in a pair it was a repaired miss) and
    # e's only neighbour d cannot be split (context_window): two failed calls, both keep the 4
    assert (t["n_scoring_failed"], t["n_failed_calls"], t["status"]) == (2, 2, "failed")
    assert whole.trace["n_split_batches"] == 0
    assert [r[2] for r in split.rows] == [r[2] for r in whole.rows]      # same scores, same walk
    assert [r[3] for r in split.rows] == pytest.approx([r[3] for r in whole.rows], abs=1e-12)
    # a replay of the recorded answers splits the same batches (the rejections are not cached)
    monkeypatch.setenv("EVICHAIN_LLM_REPLAY", "1")
    set_responder(None)
    again = CatRAGRetriever(index, GraphParams(), client(tmp_path / "b"), phrases).retrieve("q", QUESTION, H_Q)
    assert again.rows == split.rows and again.trace["n_split_batches"] == 3


# --------------------------------------------------------------------------- PropRAG
PROPS = pl.DataFrame({"prop_id": ["d0#0", "d0#1", "d1#0", "d2#0", "d3#0"],
                      "passage_id": ["d0", "d0", "d1", "d2", "d3"],
                      "text": ["A is the son of B.", "A was born in 880.", "B died in 900.", "C is a city.",
                               "D met Bee."],
                      "entities": [[]] * 5, "extractor": ["llm"] * 5})
PROP_ENTITIES = pl.DataFrame({"entity_id": ["ea", "eb", "e8", "e9", "ec", "ed", "ebee"],
                              "name": ["A", "B", "880", "900", "C", "D", "Bee"], "aliases": [[]] * 7,
                              "is_title": [True] * 7, "degree": [1] * 7})
INCIDENCE = pl.DataFrame([("d0#0", "ea"), ("d0#0", "eb"), ("d0#1", "ea"), ("d0#1", "e8"), ("d1#0", "eb"),
                          ("d1#0", "e9"), ("d2#0", "ec"), ("d3#0", "ed"), ("d3#0", "ebee")],
                         schema=["prop_id", "entity_id"], orient="row")
PROP_COS = [0.6, 0.3, 0.5, 0.1, 0.2]


def prop_encoder(texts: list[str], label: str) -> np.ndarray:
    if label == "propositions":
        return np.stack([unit(c, 1 + k) for k, c in enumerate(PROP_COS)] + [np.zeros(DIM)])[:len(texts)]
    if label == "passages":
        return np.stack([unit(c, 6 + k) for k, c in enumerate(PASSAGE_COS)]).astype(np.float32)
    vecs = np.eye(DIM, dtype=np.float32)[[12 + k for k in range(len(texts))]]
    vecs[texts.index("Bee")] = vecs[texts.index("B")]          # "Bee" ~ "B": one synonymy edge
    return vecs


@pytest.fixture()
def prop_index():  # type: ignore[no-untyped-def]
    return build_prop_index(CORPUS, PROPS, PROP_ENTITIES, INCIDENCE, prop_encoder,
                            GraphParams(proprag={"path_scoring": "average"}))


def test_proposition_connectivity_and_path_entities(prop_index) -> None:  # type: ignore[no-untyped-def]
    beam = BeamSearch(prop_index, GraphParams().proprag, lambda t: np.zeros((len(t), DIM)))
    assert beam.neighbours(0, None).tolist() == [1, 2, 4]       # A: d0#1; B: d1#0; B~Bee: d3#0
    assert beam.neighbours(3, None).tolist() == []
    assert beam.neighbours(0, np.array([1, 1, 0, 1, 1], dtype=bool)).tolist() == [1, 4]
    assert beam.synonym_targets(2, 4) == [6] and beam.synonym_targets(0, 2) == []
    ents = beam.path_entities([PropPath((2, 4), 0.5), PropPath((0,), 0.25)])
    assert ents == [(6, [0.5, 0.5]), (1, [0.5, 0.25]), (3, [0.5]), (5, [0.5]), (0, [0.25])]


def test_beam_search_scores_and_limits(prop_index) -> None:  # type: ignore[no-untyped-def]
    p = GraphParams(proprag={"beam_width": 1, "max_path_length": 2, "parallel_seeds": 0,
                             "path_scoring": "average"}).proprag
    beam = BeamSearch(prop_index, p, lambda t: np.zeros((len(t), DIM)))
    paths, initial = beam.search(H_Q, None, stats := SearchStats())
    H = prop_index.H.astype(np.float64)
    avg = {j: float(H[[0, j]].sum(0) @ H_Q / np.linalg.norm(H[[0, j]].sum(0))) for j in (1, 2, 4)}
    best = max(avg, key=avg.get)  # type: ignore[arg-type]
    assert initial == [PropPath((0,), pytest.approx(0.6))]
    assert paths[0].props == (0, best) and paths[0].score == pytest.approx(avg[best])
    assert stats.candidates == 3 and stats.reencoded == 0
    wide = BeamSearch(prop_index, GraphParams(proprag={"path_scoring": "average"}).proprag, lambda t: t)
    all_paths, _ = wide.search(H_Q, None, SearchStats())
    assert len({frozenset(x.props) for x in all_paths}) == len(all_paths)
    assert all(len(set(x.props)) == len(x.props) <= 3 for x in all_paths)
    scores = [x.score for x in all_paths]
    assert len(all_paths) <= 4 * 3 and scores == sorted(scores, reverse=True)


def test_concatenated_scoring_re_encodes_at_most_prefilter_k(prop_index) -> None:  # type: ignore[no-untyped-def]
    calls: list[list[str]] = []

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        return np.stack([unit(min(0.99, 0.1 * len(t.split())), 15) for t in texts])
    p = GraphParams(proprag={"prefilter_k": 2}).proprag
    stats = SearchStats()
    paths, _ = BeamSearch(prop_index, p, encode).search(H_Q, None, stats)
    assert all(len(batch) <= 2 for batch in calls) and stats.reencoded == sum(map(len, calls)) > 0
    sentences = set(PROPS["text"])
    assert all(set(t.replace(". ", ".|").split("|")) <= sentences for b in calls for t in b)
    assert all(np.isfinite(x.score) for x in paths)


def test_proprag_two_stages_match_networkx(prop_index) -> None:  # type: ignore[no-untyped-def]
    params = GraphParams(proprag={"path_scoring": "average", "focus_top_k": 2, "stage1_entities": 3})
    res = PropRAGRetriever(prop_index, params, lambda t: np.zeros((len(t), DIM))).retrieve("q", "?", H_Q)
    t, g = res.trace, prop_index.graph
    beam = BeamSearch(prop_index, params.proprag, lambda x: x)
    paths, _ = beam.search(H_Q, None, SearchStats())
    seeds = [e for e, _ in beam.path_entities(paths[:20])[:3]]
    assert t["stage1_seed_entities"] == [g.entity_names[e] for e in seeds]
    dense = np.array(PASSAGE_COS)
    dense_w = 0.05 * (dense - dense.min()) / (dense.max() - dense.min())
    w_e = np.zeros(g.n_entities)
    w_e[seeds] = 1.0
    W = g.W.toarray()
    s1 = networkx_ppr(W, np.concatenate([w_e, dense_w]), 0.75)[g.n_entities:]
    focus = np.sort(np.argsort(-s1, kind="stable")[:2])
    assert t["n_focus_passages"] == 2
    sub_ents = np.unique(np.nonzero(g.mentions.toarray()[focus])[1])
    allowed = np.isin(prop_index.owner, focus)
    paths2, initial2 = beam.search(H_Q, allowed, SearchStats())
    pos = {int(e): k for k, e in enumerate(sub_ents)}

    def best(ps: list) -> np.ndarray:  # type: ignore[type-arg]
        w = np.zeros(len(sub_ents))
        for e, sc in beam.path_entities(ps)[:5]:
            w[pos[e]] = max(0.0, max(sc))
        return w / w.max() if w.max() > 0 else w
    nodes = np.concatenate([sub_ents, g.n_entities + focus])
    reset = np.concatenate([np.maximum(best(paths2[:5]), best(initial2)), dense_w[focus]])
    sub = networkx_ppr(W[np.ix_(nodes, nodes)], reset, 0.45)
    final = s1 * 0.5 * sub.min()
    final[focus] = sub[len(sub_ents):]
    got = {pid: score for _, _, pid, score in res.rows}
    assert [got[p] for p in CORPUS["passage_id"]] == pytest.approx(final.tolist(), abs=1e-9)
    assert t["llm_calls"] == 0 and t["prompt_tokens"] == 0 and t["fallback"] == ""


def test_proprag_falls_back_without_seed_mass() -> None:
    params = GraphParams(passage_node_weight=0.0, proprag={"path_scoring": "average"})
    empty = build_prop_index(CORPUS, PROPS.clear(), PROP_ENTITIES, INCIDENCE.clear(), prop_encoder, params)
    res = PropRAGRetriever(empty, params, lambda t: t).retrieve("q", "?", H_Q)
    assert res.trace["fallback"] == "dense" and [r[2] for r in res.rows] == ["d0", "d1", "d3", "d2"]
    assert empty.graph.mentions.nnz == 0 and empty.graph.W.nnz == 2      # only the B–Bee synonymy edge


def test_catrag_neighbour_facts_are_cut_to_summary_length(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    b = ENTITIES.index("b")
    full = CatRAGRetriever(index, GraphParams(), client(tmp_path), phrases)
    assert full._other_facts(b, {1}) == [["b", "died in", "900"]]            # linking fact 1 left out
    assert full._other_facts(b, set()) == [["a", "son of", "b"], ["b", "died in", "900"]]
    short = CatRAGRetriever(index, GraphParams(catrag={"neighbour_words": 5}), client(tmp_path), phrases)
    assert short._other_facts(b, set()) == [["a", "son of", "b"]]            # 4 words, then 8 > 5


def test_edge_score_schema_sent_asks_exactly_one_score_per_neighbour() -> None:
    from evichain.methods.graph.prompts import EDGE_SCORE, edge_score_prompt

    prompt = edge_score_prompt([3, 7, 9])
    scores = json.loads(prompt.sent_schema)["properties"]["scores"]
    assert (scores["minItems"], scores["maxItems"]) == (3, 3)
    assert scores["items"]["properties"]["id"]["enum"] == [3, 7, 9]
    assert prompt.version == EDGE_SCORE.version == "2"       # part of the cache key
    # validation stays lenient: a short answer parses, the caller counts what is missing
    assert EDGE_SCORE.schema.model_validate({"scores": [{"id": 3, "score": 5}]}).scores
