"""The LLM-call estimate ``evichain run`` prints before any call (issue 61): index calls per
passage (cache hits counted with the client's own keys), per-question upper bounds from the
params, and the time figure with its source."""

from __future__ import annotations

from typing import Any

import pandas as pd
import polars as pl
import pytest

from evichain.config import Params
from evichain.llm import LLMClient
from evichain.llm.scripted import set_responder
from evichain.methods.base import get_method
from evichain.methods.estimate import CallTime, IndexCalls, call_time, estimate_calls, seconds_per_call
from evichain.methods.evireform.extract import llm_propositions
from tests.fixtures.lothair import USER_PASSAGES as PASSAGES
from tests.fixtures.scripted_llm import respond

CORPUS = pd.DataFrame([{"passage_id": f"p{i}", "title": t, "text": x}
                       for i, (_, t, x) in enumerate(PASSAGES)])


def _params(**blocks: Any) -> Params:
    return Params.model_validate({"llm": {"model": "scripted/estimate"}, **blocks})


def _estimate(method: str, params: Params, variant: str | None = None, questions: int = 3) -> Any:
    chosen = get_method(method)
    return estimate_calls(chosen, chosen.check_variant(variant), params, CORPUS, questions)


def test_llm_extraction_is_one_call_per_passage_less_the_cached_ones() -> None:
    """PropRAG reads the proposition index: 6 passages, 2 already extracted by a real client
    (the same keys the extraction flow's client uses), no per-question call."""
    params = _params(evireform={"index": {"extractor": "llm"}})
    set_responder(respond)
    client = LLMClient(params.llm.model_copy(update={"max_tokens": params.evireform.index.max_tokens}))
    for text in CORPUS["text"][:2]:
        assert llm_propositions(client, "p", text).status["status"] == "ok"
    estimate = _estimate("proprag", params)
    (index,) = estimate.index
    assert (index.label, index.calls, index.cached, index.to_make) == ("propositions", 6, 2, 4)
    assert index.rule == "1 per passage × 6 passages (evireform.index.extractor: llm)"
    assert (estimate.per_question, estimate.question_calls, estimate.total) == (0, 0, 4)
    polars_corpus = pl.from_pandas(CORPUS)  # the methods' corpus type; the user flow passes pandas
    chosen = get_method("proprag")
    assert estimate_calls(chosen, chosen.check_variant(None), params, polars_corpus, 3) == estimate


def test_sentence_extraction_makes_no_index_call() -> None:
    (index,) = _estimate("proprag", _params(evireform={"index": {"extractor": "sentences"}})).index
    assert (index.calls, index.to_make) == (0, 0)


def test_ircot_bound_is_max_steps_per_question() -> None:
    estimate = _estimate("ircot", _params(iterative={"ircot": {"max_steps": 5}}), questions=3)
    assert estimate.index == ()
    assert (estimate.per_question, estimate.question_calls, estimate.total) == (5, 15, 15)
    assert "iterative.ircot.max_steps 5" in estimate.question_rule


@pytest.mark.parametrize(("method", "blocks", "per_question"), [
    ("self_ask", {"iterative": {"self_ask": {"max_follow_ups": 3}}}, 6),
    ("s2g_rag", {"iterative": {"s2g_rag": {"max_turns": 3}}}, 5),
    ("hyde", {"expansion": {"hyde": {"n_samples": 4}}}, 4),
    ("query2doc", {}, 1),
    ("listwise", {}, 1),
    ("cross_encoder", {}, 0),
    ("dense", {}, 0),
    ("hipporag2", {"graph": {"openie": "propositions"}}, 1),
    ("catrag", {"graph": {"catrag": {"max_scored_seeds": 2, "max_scored_edges": 20,
                                     "score_batch": 15}}}, 1 + 1 + 2 * 2),
])
def test_per_question_bounds(method: str, blocks: dict[str, Any], per_question: int) -> None:
    assert _estimate(method, _params(**blocks)).per_question == per_question


def test_evireform_counts_the_variant_steps() -> None:
    params = _params(evireform={"index": {"extractor": "sentences"}, "rounds": 2})
    assert _estimate("evireform", params, "full").per_question == 1 + 2   # selection + 2 rounds
    assert _estimate("evireform", params, "reorder").per_question == 1 + 1  # selection + judge
    assert _estimate("evireform", params, "base_top").per_question == 0


def test_gear_reads_the_index_and_bounds_its_steps() -> None:
    estimate = _estimate("gear", _params(evireform={"index": {"extractor": "llm"}},
                                         iterative={"gear": {"max_steps": 3}}), questions=2)
    assert [(i.label, i.calls) for i in estimate.index] == [("propositions", 6)]
    assert estimate.per_question == 3 * 3 - 1
    assert estimate.total == 6 + 2 * 8


def test_hipporag_llm_openie_is_two_calls_per_passage() -> None:
    (index,) = _estimate("hipporag2", _params(graph={"openie": "llm"})).index
    assert (index.label, index.calls, index.cached) == ("triples", 12, None)


@pytest.mark.parametrize(("facets", "calls"), [
    ({"max_pairs_per_passage": 3, "n_neighbours": 5}, 6 * 3),                       # every passage
    ({"max_pairs_per_passage": 2, "facet_scope": "reachable", "facet_scope_n": 1}, 3 * 2),  # 3 q × 1
])
def test_cee_facets_are_pairs_times_targets(facets: dict[str, Any], calls: int) -> None:
    estimate = _estimate("cee", _params(cee={"rounds": 3, "facets": facets}), "full", questions=3)
    (index,) = estimate.index
    assert (index.label, index.calls) == ("facets", calls)
    assert estimate.per_question == 2 * 3 - 1


def test_cee_sentence_facets_need_no_index_call() -> None:
    assert _estimate("cee", _params(), "robust").index == ()


def test_seconds_per_call_sources() -> None:
    local = seconds_per_call(_params(llm={"model": "local/qwen2.5-coder-1.5b-instruct-q4_k_m"}).llm)
    assert local.seconds == 9.0 and "bench_local_llm.results.md" in local.source
    assert seconds_per_call(_params().llm).seconds == 0.0
    hosted = seconds_per_call(_params(llm={"model": "openai/gpt-x"}).llm)
    assert hosted.seconds is None and "--seconds-per-call" in hosted.source
    assert seconds_per_call(_params().llm, 2.5) == CallTime(2.5, "your figure (--seconds-per-call)")


def test_time_is_calls_times_seconds_over_concurrency() -> None:
    assert call_time(1890, CallTime(9.0, "x"), 1) == 17010.0
    assert call_time(100, CallTime(9.0, "x"), 2) == 450.0
    assert call_time(100, CallTime(None, "x"), 1) is None


def test_index_calls_to_make() -> None:
    assert IndexCalls("x", 10, None, "").to_make == 10
    assert IndexCalls("x", 10, 4, "").to_make == 6
