"""GeAR's graph expansion on hand-built numbers, the small parsing helpers of the iterative
baselines, and the ``iterative`` params section."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from evichain.config import ParamsError, parse_params
from evichain.llm.types import LLMFailure
from evichain.methods.iterative.common import Episode, Passages, clean_text, finish, top_rows
from evichain.methods.iterative.gear import clean_triples
from evichain.methods.iterative.gear_graph import EntityGraph, Path
from evichain.methods.iterative.ircot import parse_step
from evichain.methods.iterative.params import IterativeParams
from evichain.methods.iterative.prompts import IRCoTStep
from evichain.methods.iterative.s2g_rag import GapItem, gap_query
from evichain.methods.iterative.self_ask import round_robin


def hand_graph() -> EntityGraph:
    """Propositions p0…p4 owned by passages 0,1,2,3,1; entities e0: {p0,p1,p4}, e1: {p1,p2},
    e2: {p3}; 2-d embeddings with u = (1, .6, .8, 0, .28) for the query (1, 0)."""
    H = np.array([[1.0, 0.0], [0.6, 0.8], [0.8, 0.6], [0.0, 1.0], [0.28, 0.96]], dtype=np.float32)
    rows, cols = [0, 1, 1, 2, 3, 4], [0, 0, 1, 1, 2, 0]
    A = sp.csr_matrix((np.ones(6), (rows, cols)), shape=(5, 3))
    return EntityGraph(H, np.array([0, 1, 2, 3, 1]), A, A.T.tocsr())


def test_link_takes_the_nearest_positive_propositions() -> None:
    g = hand_graph()
    v = np.array([[0.8, 0.6]], dtype=np.float32)            # sims .8, .96, 1.0, .6, .8
    assert g.link(v, 1) == [2] and g.link(v, 2) == [2, 1]
    assert g.link(np.array([[-1.0, 0.0]], dtype=np.float32), 3) == []   # nothing positive


def test_beam_search_path_scores_are_mean_u() -> None:
    g = hand_graph()
    u = g.scores(np.array([1.0, 0.0], dtype=np.float32))
    assert np.allclose(u, [1.0, 0.6, 0.8, 0.0, 0.28])
    out = g.expand([0], u, beam_size=5, hops=2)
    # hop 0: p0 (1.0); hop 1: p0→p1 via e0 ((1+.6)/2 = .8; p4 in the same passage scores less);
    # hop 2: p1→p2 via e1 ((1+.6+.8)/3 = .8); p3 shares no entity and is never reached.
    assert [r for r, _ in out] == [0, 1, 2]
    assert np.allclose([s for _, s in out], [1.0, 0.8, 0.8])
    assert g.expand([0], u, beam_size=5, hops=2, exclude={0}) == out[1:]
    assert g.expand([0, 2], u, beam_size=1, hops=0) == [(0, 1.0)]       # beam keeps the best
    assert g.expand([3], u, beam_size=5, hops=2) == [(3, 0.0)]           # isolated proposition


def test_beam_keeps_one_path_per_end_passage() -> None:
    paths = [Path(1.8, (0, 1), 1), Path(1.28, (0, 1), 4), Path(1.8, (0, 2), 2)]
    kept = EntityGraph._keep(paths, 5)
    assert [p.passages[-1] for p in kept] == [1, 2] and kept[0].last == 1


def test_supporting_passages_map_memory_to_retrieved_passages() -> None:
    g = hand_graph()
    v = np.array([[0.8, 0.6], [0.0, 1.0]], dtype=np.float32)
    assert g.supporting_passages(v, {0, 1}) == [1]                      # p1 (.96), then p4 (.96)→1
    assert g.supporting_passages(v, {2, 3}) == [2, 3]
    assert g.supporting_passages(v, set()) == []


def test_top_rows_excludes_and_breaks_ties_by_row() -> None:
    s = np.array([0.5, 0.9, 0.9, 0.0, -0.1])
    assert top_rows(s, 3) == [(1, 0.9), (2, 0.9), (0, 0.5)]
    assert top_rows(s, 3, exclude={1}) == [(2, 0.9), (0, 0.5), (3, 0.0)]
    assert top_rows(s, 5, positive_only=True) == [(1, 0.9), (2, 0.9), (0, 0.5)]


def test_parsing_helpers() -> None:
    ep = Episode("q", "Q?", client=None)  # type: ignore[arg-type]
    assert parse_step(IRCoTStep(reasoning_step="X is Y. So the answer is: Paris.", answer=None), ep) \
        == ("X is Y. So the answer is: Paris.", "Paris")
    assert parse_step(IRCoTStep(reasoning_step="Ann is tall. Bob is not.", answer="null"), ep) \
        == ("Ann is tall.", None)
    assert parse_step(IRCoTStep(reasoning_step="So the answer is:", answer=None), ep) == ("So the answer is:", None)
    assert dict(ep.repairs) == {"answer_from_sentence": 1, "extra_sentences_dropped": 1}
    assert clean_text("  a \n b ") == "a b" and clean_text(None) == "" and clean_text("None") == ""
    triples = clean_triples([["a", "b", "c"], ["A", " b", "C"], ["a", "b"], ["a", "", "c"]], ep, "x")
    assert triples == [("a", "b", "c")]
    assert ep.repairs["duplicate_x_triple"] == 1 and ep.repairs["malformed_x_triple"] == 2
    assert round_robin([[1, 2, 3], [4], [5, 1]]) == [1, 4, 5, 2, 3]


def test_gap_query_modes() -> None:
    gaps = [GapItem(target="Ermengarde", slot="death date", description="when she died"),
            GapItem(description="the spouse"), GapItem(target="ermengarde", slot="DEATH DATE")]
    assert gap_query(gaps, "target_slot") == "Ermengarde death date; the spouse"
    assert gap_query(gaps, "description") == "when she died; the spouse; ermengarde DEATH DATE"
    assert gap_query([], "target_slot") == ""


def test_failure_trace_row_and_stop_reason_checks() -> None:
    ep = Episode("q1", "Q?", client=None)  # type: ignore[arg-type]
    ep.failure, ep.failed_step = LLMFailure("timeout", "after 5 attempts", None, None, "k"), "judge"  # type: ignore[arg-type]
    passages = Passages(["a", "b"], ["A", "B"], ["x", "y"])
    ep.add([1, 0, 1])
    with pytest.raises(RuntimeError):
        finish(ep, "m", passages, [], {})
    with pytest.raises(ValueError):
        ep.stop("finished")
    ep.stop("llm_failure")
    out = finish(ep, "m", passages, [(1, "y")], {"extra": 1})
    assert out.trace["status"] == "failed" and out.trace["error"] == "judge: after 5 attempts"
    assert out.run == [("q1", 1, "b", 1.0), ("q1", 2, "a", 0.5)]
    assert out.evidence == [{"question_id": "q1", "position": 1, "passage_id": "b", "title": "B", "text": "y"}]


def test_params_section() -> None:
    p = IterativeParams()
    assert p.methods == ["ircot", "self_ask", "s2g_rag", "gear"] and p.retriever == "dense"
    assert (p.ircot.max_steps, p.ircot.max_paragraphs) == (8, 15)
    with pytest.raises(ParamsError, match="iterative.methods"):
        parse_params({"iterative": {"methods": ["ircot", "flare"]}})
    with pytest.raises(ParamsError, match="must not repeat"):
        parse_params({"iterative": {"methods": ["ircot", "ircot"]}})
    with pytest.raises(ParamsError, match="unknown key 'iterative.gear.beam'"):
        parse_params({"iterative": {"gear": {"beam": 3}}})
