"""The shared graph index: repair of OpenIE items, LLM-free triples from propositions, node-name
normalisation, facts, the weight matrix (relation 2(R+Rᵀ), synonymy S+Sᵀ, passage edges 1) and
the blocked synonymy kNN; numeric checks on hand-built data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from evichain.methods.graph.graph import (build_graph, fact_text, min_max, normalize_phrase,
                                          proposition_occurrences, synonymy_matrix, triple_facts)
from evichain.methods.graph.openie import clean_entities, clean_triples, proposition_triples
from evichain.methods.graph.params import GraphParams


def test_clean_triples_counts_what_it_drops() -> None:
    raw = [["Lothair II", "son of", "Lothair I"], ["Lothair II", "son of"], "not a triple",
           ["lothair ii", "SON OF", "lothair i"], ["A", " ", "B"], ["X", "born in", 855],
           ["A", "b", None], [1, True, "x"], ["  Teutberga ", "married  to", "Lothair II"]]
    triples, invalid, duplicates = clean_triples(raw)
    assert triples == [("Lothair II", "son of", "Lothair I"), ("X", "born in", "855"),
                       ("Teutberga", "married to", "Lothair II")]
    assert invalid == 5 and duplicates == 1
    assert clean_entities(["A", "a", " B  c ", 3, None, ["x"], ""]) == ["A", "B c", "3"]


def test_params_defaults_and_validation() -> None:
    p = GraphParams()
    assert (p.damping, p.synonymy_threshold, p.passage_node_weight, p.top_k) == (0.5, 0.8, 0.05, 200)
    assert (p.hipporag2.linking_top_k, p.catrag.anchor_weight, p.proprag.beam_width,
            p.proprag.max_path_length) == (5, 0.2, 4, 3)
    assert GraphParams(openie_by_dataset={"2wiki_s": "propositions"}).openie_for("2wiki_s") == "propositions"
    assert GraphParams().openie_for("demo") == "llm"
    with pytest.raises(ValueError, match="unknown graph method"):
        GraphParams(methods=["hipporag3"])
    with pytest.raises(ValueError, match="unknown dataset"):
        GraphParams(openie_by_dataset={"nope": "llm"})
    with pytest.raises(ValueError, match="filter_max_kept"):
        GraphParams(hipporag2={"linking_top_k": 3, "filter_max_kept": 4})


def test_normalisation_and_facts() -> None:
    assert normalize_phrase("  Prüm Abbey's   (Eifel)_x ") == "prüm abbey s eifel x"
    triples = pd.DataFrame([("d1", "Lothair II", "son of", "Lothair I"),
                            ("d1", "lothair ii", "Son of", "LOTHAIR I"),      # same fact, same passage
                            ("d2", "Lothair II", "son of", "Lothair I"),      # same fact, other passage
                            ("d2", "Teutberga", "married", "Lothair II"),
                            ("d2", "!!", "is", "x")],                         # empty subject: dropped
                           columns=["passage_id", "subject", "predicate", "object"])
    names, facts, occ = triple_facts(triples, ["d1", "d2", "d3"])
    assert names == ["lothair i", "lothair ii", "teutberga"]
    assert facts.facts == [("lothair ii", "son of", "lothair i"), ("teutberga", "married", "lothair ii")]
    assert facts.passages.toarray().tolist() == [[1, 1, 0], [0, 1, 0]]
    assert fact_text(facts.facts[0]) == "('lothair ii', 'son of', 'lothair i')"
    assert facts.entity_incidence(3).toarray().tolist() == [[1, 1, 0], [0, 1, 1]]
    assert sorted(zip(occ.pair_passage, occ.pair_a, occ.pair_b)) == [(0, 1, 0), (1, 1, 0), (1, 2, 1)]
    with pytest.raises(ValueError, match="not in the corpus"):
        triple_facts(triples, ["d1"])


def test_weight_matrix_reproduces_the_released_graph() -> None:
    triples = pd.DataFrame([("d1", "a", "r", "b"), ("d2", "a", "r", "b"), ("d2", "b", "s", "c"),
                            ("d3", "c", "t", "c")], columns=["passage_id", "subject", "predicate", "object"])
    names, _, occ = triple_facts(triples, ["d1", "d2", "d3", "d4"])
    S = sp.csr_matrix(([0.9, 0.85], ([0, 2], [2, 0])), shape=(3, 3))      # a→c, c→a (kNN both ways)
    g = build_graph(names, ["d1", "d2", "d3", "d4"], occ, S)
    W = g.W.toarray()
    assert np.allclose(W, W.T)
    assert W[0, 1] == 4.0            # a–b stated in two passages: 2 (R + Rᵀ) = 2 × 2
    assert W[1, 2] == 2.0            # b–c once
    assert W[2, 2] == 0.0            # self-pair dropped
    assert W[0, 2] == pytest.approx(1.75)                                  # synonymy S + Sᵀ
    assert W[0, 3] == 1.0 and W[1, 4] == 1.0 and W[2, 5] == 1.0 and W[0, 5] == 0.0   # passage edges
    assert g.passages_per_entity.tolist() == [2, 2, 2]
    assert g.statistics() == {"entity_nodes": 3, "passage_nodes": 4, "relation_edges": 2,
                              "synonymy_edges": 1, "passage_entity_edges": 6, "arcs": int(g.W.nnz),
                              "isolated_passages": 1}


def test_synonymy_knn_threshold_caps_and_short_names() -> None:
    names = ["lothair", "lothar", "xy", "x y", "paris"]
    v = np.array([[1, 0, 0], [0.9, np.sqrt(1 - 0.81), 0], [1, 0, 0], [1, 0, 0], [0, 0, 1]], dtype=np.float32)
    S = synonymy_matrix(names, v, threshold=0.8, topk=10, max_per_node=10, min_chars=3, block=2)
    dense = S.toarray()
    assert dense[0, 1] == pytest.approx(0.9) and dense[1, 0] == pytest.approx(0.9)
    assert dense[0, 2] == pytest.approx(1.0) and dense[0, 3] == pytest.approx(1.0)
    assert not dense[2].any() and not dense[3].any()       # "xy", "x y": < 3 alphanumerics
    assert not dense[4].any() and dense.diagonal().sum() == 0
    capped = synonymy_matrix(names, v, threshold=0.8, topk=10, max_per_node=1, min_chars=3).toarray()
    assert capped[0].nonzero()[0].tolist() == [2]           # best (1.0, lower index first) only
    assert capped[1].nonzero()[0].tolist() == [0]


def test_propositions_give_llm_free_triples_and_relations() -> None:
    corpus = pd.DataFrame({"passage_id": ["p1", "p2"], "title": ["A", "B"], "text": ["x", "y"]})
    props = pd.DataFrame({"prop_id": ["p1#1", "p1#0", "p2#0"], "passage_id": ["p1", "p1", "p2"],
                          "text": ["A  met B and C.", "A lived.", "B died."], "entities": [[], [], []],
                          "extractor": ["sentences"] * 3})
    entities = pd.DataFrame({"entity_id": ["ea", "eb", "ec"], "name": ["A", "B", "C"],
                             "aliases": [[], [], []], "is_title": [True, True, False], "degree": [2, 2, 1]})
    incidence = pd.DataFrame([("p1#0", "ea"), ("p1#1", "ea"), ("p1#1", "eb"), ("p1#1", "ec"),
                              ("p1#1", "eb"), ("p2#0", "eb")], columns=["prop_id", "entity_id"])
    out = proposition_triples(corpus, props, entities, incidence)
    assert [(t["subject"], t["predicate"], t["object"], t["prop_id"]) for t in out[0].triples] == [
        ("A", "A met B and C.", "B", "p1#1"), ("A", "A met B and C.", "C", "p1#1"),
        ("B", "A met B and C.", "C", "p1#1")]
    assert [t["triple_id"] for t in out[0].triples] == ["p1#t0", "p1#t1", "p1#t2"]
    assert out[0].status["n_triples"] == 3 and out[0].status["entities"] == ["A", "B", "C"]
    assert out[1].triples == [] and out[1].status["status"] == "ok"
    A = sp.csr_matrix(np.array([[1, 0, 0], [1, 1, 1], [0, 1, 0]], dtype=float))
    occ = proposition_occurrences(np.array([0, 0, 1]), A)
    assert sorted(zip(occ.pair_a, occ.pair_b)) == [(0, 1), (0, 2), (1, 2)]
    assert sorted(zip(occ.mention_passage, occ.mention_entity)) == [(0, 0), (0, 0), (0, 1), (0, 2), (1, 1)]


def test_min_max() -> None:
    assert min_max(np.array([2.0, 4.0, 3.0])).tolist() == [0.0, 1.0, 0.5]
    assert min_max(np.array([1.0, 1.0])).tolist() == [0.0, 0.0]
