"""End-to-end EviReform retrieval on a tiny corpus: sentence index, canonicalised entities,
the real MiniLM embedder (``EmbedParams()``), the scripted LLM, every variant, the run and
trace tables of the one retrieval flow (:mod:`flows.method`), zero LLM calls on a warm re-run, and the pool-coverage tables."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evichain.config import EmbedParams, LLMParams, OrchestrationParams
from evichain.embed import get_embedder
from evichain.io import write_parquet
from evichain.llm import LLMCache, LLMClient
from evichain.llm.scripted import set_responder
from evichain.methods.evireform.coverage import coverage_table, selection_table, token_table, transition_table
from evichain.methods.evireform.index import EviReformIndex, build_index
from evichain.methods.evireform.llm_steps import EviReformLLM
from evichain.methods.evireform.params import EviReformParams
from evichain.methods.evireform.retrieve import EviReformRetriever
from evichain.methods.evireform.variants import VARIANTS, variant_params
from evichain.paths import DatasetPaths
from tests.fixtures.lothair import QUESTION, sentence_index
from tests.fixtures.lothair import SEVEN_PASSAGES as PASSAGES

GOLD = ["d0", "d1"]


@lru_cache(maxsize=1)
def tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    corpus = pd.DataFrame(PASSAGES, columns=["passage_id", "title", "text"])
    props, entities, incidence = sentence_index(corpus)
    return corpus, props, entities, incidence


@lru_cache(maxsize=1)
def index() -> EviReformIndex:
    corpus, props, entities, incidence = tables()
    H = get_embedder(EmbedParams()).encode(props["text"].tolist())
    return build_index(corpus, props, entities, incidence, H, "{title}\n{text}")


def respond(messages: list[dict], model: str) -> str:
    """A scripted 'good' model for the four online prompts."""
    system, data = messages[0]["content"], json.loads(messages[-1]["content"])
    if system.startswith("You compile"):
        ids = [c["i"] for c in data["c"] if "son of" in c["t"]] or [data["c"][0]["i"]]
        return json.dumps({"selected_proposition_ids": ids})
    if system.startswith("Given a question"):
        return json.dumps({"queries": ["When did Ermengarde of Tours die?"]})
    if system.startswith("You judge"):
        return json.dumps({"ordered_doc_ids": [c["id"] for c in reversed(data["c"])]})
    if system.startswith("You are a bounded"):
        gaps = [] if data["round"] > 1 else [{"description": "death of Ermengarde",
                                              "retrieval_query": "Ermengarde of Tours death date"}]
        return json.dumps({"sufficient": data["round"] > 1, "gaps": gaps})
    raise AssertionError(f"unexpected prompt: {system[:40]}")


def retriever(tmp_path: Path, params: EviReformParams) -> EviReformRetriever:
    set_responder(respond)
    client = LLMClient(LLMParams(model="scripted/e2e", backoff_base_s=0.0),
                       cache=LLMCache(tmp_path / "llm.sqlite"))
    return EviReformRetriever(index(), params, EviReformLLM(client, params),
                              get_embedder(EmbedParams()).encode)


def run_question(tmp_path: Path, variant: str):  # type: ignore[no-untyped-def]
    params = variant_params(EviReformParams(top_k=7), variant)
    h_q = get_embedder(EmbedParams()).encode([QUESTION])[0]
    return retriever(tmp_path, params).retrieve("q1", QUESTION, h_q, GOLD)


def rank_of(result, pid: str) -> int:  # type: ignore[no-untyped-def]
    return next(r[1] for r in result.rows if r[2] == pid)


def test_full_finds_the_second_hop_that_base_misses(tmp_path: Path) -> None:
    base, full = run_question(tmp_path, "base"), run_question(tmp_path, "full")
    t = full.trace
    assert t["observed_passage_ids"] == ["d0"] and t["gold_selected"] == 1
    assert t["residual_queries"] == ["When did Ermengarde of Tours die?"]
    assert any(pid.startswith("d1#") for pid in t["retained_residual_prop_ids"])
    assert not t["c0_complete"] or t["cplus_complete"]
    assert t["cplus_complete"] and t["cplus_gold"] == 2
    assert rank_of(full, "d1") <= 2 and rank_of(full, "d0") <= 2
    assert rank_of(base, "d1") > rank_of(full, "d1")
    assert base.trace["residual_queries"] == [] and not base.trace["residual_fallback"]
    assert full.seconds["compute"] < 1.0 and full.seconds["llm"] > 0


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_runs(tmp_path: Path, variant: str) -> None:
    result = run_question(tmp_path, variant)
    ranked = [r[2] for r in result.rows]
    assert len(ranked) == len(set(ranked)) and [r[1] for r in result.rows] == list(range(1, len(ranked) + 1))
    scores = [r[3] for r in result.rows]
    assert scores == sorted(scores, reverse=True)
    t = result.trace
    if variant == "reorder":
        assert t["judge_status"] == "ok" and t["judge_prompt_tokens"] > 0
        assert ranked == list(reversed(t["c0_passage_ids"]))              # the judge's order only
    else:
        assert len(ranked) == len(PASSAGES)
    if variant == "rounds3":
        assert t["rounds_used"] == 2 and t["residual_rounds"] == [1]
    elif variant == "repeat_question":
        assert t["repeat_count"] == 2 and len(t["retained_residual_prop_ids"]) == 2
    elif variant.endswith("_top"):
        assert t["selection_status"] == "top" and t["sel_prompt_tokens"] == 0


def write_toy_dataset(tmp_path: Path) -> DatasetPaths:
    """The toy corpus, two questions and the index tables (propositions shuffled) on disk."""
    corpus, props, entities, incidence = tables()
    questions = pd.DataFrame({"question_id": ["q1", "q2"], "question": [QUESTION, "Where is Erstein?"],
                              "gold_passage_ids": [GOLD, ["d4"]]})
    paths = DatasetPaths("toy", root=tmp_path / "artifacts")
    for table, path in ((corpus, paths.corpus), (questions, paths.questions),
                        (props.sample(frac=1.0, random_state=3), paths.index_file("propositions.parquet")),
                        (entities, paths.index_file("entities.parquet")),
                        (incidence, paths.index_file("incidence.parquet"))):
        write_parquet(table, path)
    return paths


def test_flow_tables_and_warm_rerun_makes_no_llm_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evichain.config import parse_params
    from flows.method import retrieval_flow

    monkeypatch.setenv("EVICHAIN_LLM_CACHE", str(tmp_path / "llm.sqlite"))
    paths = write_toy_dataset(tmp_path)
    params = parse_params({}).model_copy(update={
        "evireform": EviReformParams(top_k=5), "embed": EmbedParams(),
        "llm": LLMParams(model="scripted/flow", backoff_base_s=0.0),
        "orchestration": OrchestrationParams(max_workers=2)})
    args = (paths, "evireform", "full", params, "retrieve_evireform")
    set_responder(respond)
    first = retrieval_flow(*args)
    assert first.summary["llm_usage"]["calls"] == 4                       # 2 × (select + reformulate)
    set_responder(lambda m, model: (_ for _ in ()).throw(AssertionError("LLM called on a warm cache")))
    second = retrieval_flow(*args)
    assert second.summary["llm_usage"]["calls"] == 0 and second.summary["llm_usage"]["cache_hits"] == 4
    pd.testing.assert_frame_equal(first.run, second.run)
    pd.testing.assert_frame_equal(first.trace, second.trace)               # tokens from the cache too
    assert list(first.run.columns) == ["question_id", "rank", "passage_id", "score"]
    assert first.run.groupby("question_id").size().tolist() == [5, 5]
    for col in ("candidate_ids", "selected_ids", "observed_passage_ids", "residual_queries",
                "retained_residual_prop_ids", "sel_prompt_tokens", "ref_prompt_tokens",
                "gold_selected", "c0_passage_ids", "cplus_passage_ids"):
        assert col in first.trace.columns
    assert first.summary["latency_compute"]["p50_ms"] < 1000


def test_coverage_tables_from_traces() -> None:
    traces = pd.DataFrame({
        "question_id": ["a", "b", "c", "d"], "n_gold": [2, 2, 2, 0],
        "c0_gold": [2, 1, 0, 0], "cplus_gold": [2, 2, 1, 0],
        "c0_complete": [True, False, False, False], "cplus_complete": [True, True, False, False],
        "gold_in_candidates": [2, 1, 1, 0], "gold_selected": [1, 1, 0, 0],
        "selection_fallback": [False, True, False, False], "residual_fallback": [False] * 4,
        "selected_ids": [["x"], ["y", "z"], ["w"], []], "n_invalid_ids": [0, 1, 0, 0],
        **{f"{s}_{k}_tokens": [10, 20, 30, 40] for s in ("sel", "ref", "judge")
           for k in ("prompt", "completion")}})
    a3 = coverage_table(traces).set_index("pool")
    assert a3.loc["initial (C0)", "gold_coverage"] == 50.0 and a3.loc["+residual (C+)", "gold_coverage"] == pytest.approx(83.33)
    assert a3.loc["initial (C0)", "complete_chain"] == pytest.approx(33.33)
    a4 = transition_table(traces).iloc[0]
    assert (a4["pools_missing_gold"], a4["became_complete"], a4["gained_but_incomplete"],
            a4["unchanged"], a4["new_gold_passages"]) == (2, 1, 1, 0, 2)
    sel = selection_table(traces).iloc[0]
    assert sel["gold_selected_pct"] == pytest.approx(33.33) and sel["invalid_ids"] == 1
    assert token_table(traces).iloc[0]["total"] == 6 * 25.0
    assert np.isclose(coverage_table(traces, ["a"]).iloc[1]["complete_chain"], 100.0)
