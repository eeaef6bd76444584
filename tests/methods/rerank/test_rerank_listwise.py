"""Listwise LLM reranker (EviReform Listing 14) and its run through the one retrieval flow
(:mod:`flows.method`): repairs of the model's id
list, the passage-length cap, failures and fallbacks, the dense pool (recomputed when the dense
run is shallower than the pool), the tail below the pool, and a warm re-run without LLM calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from evichain.config import DenseParams, EmbedParams, LLMParams, OrchestrationParams
from evichain.io import write_parquet
from evichain.llm import LLMCache, LLMClient
from evichain.llm.scripted import set_responder
from evichain.methods.rerank.listwise import (LISTING_14, ListwiseReranker, fit_payload,
                                              repair_order)
from evichain.methods.rerank.params import ListwiseParams, RerankParams, run_name
from evichain.methods.rerank.pool import Candidate, reranked_rows
from evichain.paths import DatasetPaths
from tests.fixtures.lothair import SIX_PASSAGES as PASSAGES

QUESTIONS = [("q1", "When did Lothair II's mother die?", ["d0", "d1"]),
             ("q2", "Where is Erstein?", ["d3"])]


def pool(n: int = 4) -> list[Candidate]:
    return [Candidate(pid, t, x, 1.0 - i / 10) for i, (pid, t, x) in enumerate(PASSAGES[:n])]


def client(tmp_path: Path, name: str = "scripted/listwise") -> LLMClient:
    return LLMClient(LLMParams(model=name, backoff_base_s=0.0, max_retries=0),
                     cache=LLMCache(tmp_path / "llm.sqlite"))


def reply(ids: list[object]):  # type: ignore[no-untyped-def]
    def respond(messages: list[dict], model: str) -> str:
        assert messages[0]["content"] == LISTING_14
        return json.dumps({"ordered_doc_ids": ids})
    return respond


# ----------------------------------------------------------------------------- repairs
def test_repair_keeps_first_valid_occurrences_then_missing_in_pool_order() -> None:
    order, c = repair_order([3, 3, 99, 0, "2", "doc 5", "x"], 5)
    assert order == [2, 1, 4, 0, 3]                    # 3, 2, 5 then missing 1, 4 in pool order
    assert (c.coerced, c.unknown, c.duplicate, c.missing) == (2, 3, 1, 2)


def test_repair_of_a_perfect_answer_changes_nothing() -> None:
    order, c = repair_order([2, 1, 3], 3)
    assert order == [1, 0, 2] and (c.coerced, c.unknown, c.duplicate, c.missing) == (0, 0, 0, 0)


def test_repair_of_an_empty_answer_is_the_pool_order() -> None:
    order, c = repair_order([], 4)
    assert order == [0, 1, 2, 3] and c.missing == 4


# ----------------------------------------------------------------------------- context cap
def test_fit_payload_lowers_the_word_cap_until_the_prompt_fits() -> None:
    long = [Candidate(f"p{i}", f"T{i}", " ".join(["word"] * 300), 0.0) for i in range(40)]
    words_of = lambda text: len(text.split())  # noqa: E731
    params = ListwiseParams(passage_words=100, max_prompt_tokens=2500, shrink=0.5, min_passage_words=10)
    payload, words, tokens = fit_payload("q?", long, params, words_of)
    assert words == 50 and tokens <= 2500                  # 100 words do not fit, 50 do
    data = json.loads(payload)
    assert [c["id"] for c in data["c"]] == list(range(1, 41))
    assert all(len(c["text"].split("\n", 1)[1].split()) == 50 for c in data["c"])
    floor = ListwiseParams(passage_words=100, max_prompt_tokens=256, min_passage_words=20)
    assert fit_payload("q?", long, floor, words_of)[1] == 20     # the floor is used as is


# ----------------------------------------------------------------------------- reranker
def test_reranker_applies_the_model_order_and_counts_repairs(tmp_path: Path) -> None:
    set_responder(reply([4, 4, 17, "1"]))
    result = ListwiseReranker(client(tmp_path), ListwiseParams()).rerank("q?", pool())
    assert result.order == ["d3", "d0", "d1", "d2"] and result.status == "ok" and not result.fallback
    t = result.trace()
    assert (t["n_duplicate_ids"], t["n_unknown_ids"], t["n_coerced_ids"], t["n_missing_ids"]) == (1, 1, 1, 2)
    assert t["prompt_tokens"] > 0 and t["completion_tokens"] > 0 and t["passage_words"] == 100


def test_no_valid_id_is_a_recorded_failure_with_dense_order_fallback(tmp_path: Path) -> None:
    set_responder(reply([77, 78]))                         # repair turn, then failure
    result = ListwiseReranker(client(tmp_path), ListwiseParams()).rerank("q?", pool())
    assert result.status == "failed" and result.error_kind == "invalid_schema" and result.fallback
    assert result.order == ["d0", "d1", "d2", "d3"]


def test_malformed_json_with_on_failure_empty_gives_no_order(tmp_path: Path) -> None:
    set_responder(lambda m, model: "ordered: 2, 1")
    result = ListwiseReranker(client(tmp_path), ListwiseParams(on_failure="empty")).rerank("q?", pool())
    assert result.status == "failed" and result.error_kind == "invalid_json"
    assert result.order == [] and not result.fallback


def test_reranked_rows_put_the_pool_above_the_tail() -> None:
    rows = reranked_rows("q", ["b", "a"], ["c", "a", "d"])
    assert [r[2] for r in rows] == ["b", "a", "c", "d"] and [r[1] for r in rows] == [1, 2, 3, 4]
    assert [r[3] for r in rows] == [4.0, 3.0, 2.0, 1.0]


def test_run_name_rejects_unknown_methods() -> None:
    assert run_name("listwise") == "rerank-listwise"
    with pytest.raises(ValueError, match="unknown reranker"):
        run_name("pointwise")


# ----------------------------------------------------------------------------- flow
def dataset(tmp_path: Path, dense_k: int) -> DatasetPaths:
    from flows.retrieve import dense_flow

    paths = DatasetPaths("toy", root=tmp_path / "artifacts")
    write_parquet(pd.DataFrame(PASSAGES, columns=["passage_id", "title", "text"]), paths.corpus)
    write_parquet(pd.DataFrame(QUESTIONS, columns=["question_id", "question", "gold_passage_ids"]),
                  paths.questions)
    run = dense_flow(paths.corpus, paths.questions, DenseParams(top_k=dense_k), EmbedParams(),
                     OrchestrationParams(max_workers=2))
    write_parquet(run, paths.run("dense"))
    return paths


def rerank_flow(paths: DatasetPaths, method: str, params: RerankParams, dense: DenseParams,
                embed: EmbedParams, llm: LLMParams, orch: OrchestrationParams, stage: str) -> Any:
    """``method`` through the one retrieval flow (:func:`flows.method.retrieval_flow`), with
    ``rerank``, ``retrieval.dense``, ``embed``, ``llm`` and ``orchestration`` replaced."""
    from evichain.config import parse_params
    from flows.method import retrieval_flow

    base = parse_params({})
    whole = base.model_copy(update={
        "rerank": params, "retrieval": base.retrieval.model_copy(update={"dense": dense}),
        "embed": embed, "llm": llm, "orchestration": orch})
    return retrieval_flow(paths, method, None, whole, stage=stage)


def reversed_pool(messages: list[dict], model: str) -> str:
    data = json.loads(messages[-1]["content"])
    return json.dumps({"ordered_doc_ids": [c["id"] for c in reversed(data["c"])]})


def test_flow_recomputes_a_deeper_pool_and_reruns_from_the_cache(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVICHAIN_LLM_CACHE", str(tmp_path / "flow-llm.sqlite"))
    paths = dataset(tmp_path, dense_k=2)                  # shallower than the pool of 4
    dense = pd.read_parquet(paths.run("dense"))
    args = (paths, "listwise", RerankParams(pool_size=4), DenseParams(top_k=2), EmbedParams(),
            LLMParams(model="scripted/rerank-flow", backoff_base_s=0.0), OrchestrationParams(max_workers=2))
    set_responder(reversed_pool)
    out = rerank_flow(*args, stage="test-rerank-flow-1")
    assert out.summary["pool_source"] == "recomputed" and out.summary["pool_prefix_mismatches"] == 0
    assert out.summary["llm_usage"]["calls"] == 2 and out.summary["status"] == {"ok": 2}
    for qid, g in out.run.groupby("question_id"):
        t = out.trace.set_index("question_id").loc[qid]
        assert list(t["pool_ids"][:2]) == dense[dense["question_id"] == qid]["passage_id"].tolist()
        assert g.sort_values("rank")["passage_id"].tolist() == list(reversed(t["pool_ids"]))
    assert int(out.trace["gold_in_pool"].sum()) >= 2
    set_responder(lambda m, model: (_ for _ in ()).throw(AssertionError("LLM called on a warm cache")))
    again = rerank_flow(*args, stage="test-rerank-flow-2")
    assert again.summary["llm_usage"]["calls"] == 0 and again.summary["llm_usage"]["cache_hits"] == 2
    pd.testing.assert_frame_equal(out.run, again.run)


def test_flow_keeps_the_dense_run_below_a_smaller_pool(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVICHAIN_LLM_CACHE", str(tmp_path / "flow-llm.sqlite"))
    paths = dataset(tmp_path, dense_k=5)
    dense = pd.read_parquet(paths.run("dense"))
    set_responder(lambda m, model: "not json at all")     # every call fails: dense order kept
    out = rerank_flow(paths, "listwise", RerankParams(pool_size=2), DenseParams(top_k=5), EmbedParams(),
                      LLMParams(model="scripted/rerank-tail", backoff_base_s=0.0, max_retries=0),
                      OrchestrationParams(max_workers=2), stage="test-rerank-tail")
    assert out.summary["pool_source"] == "dense_run" and out.summary["fallbacks"] == 2
    assert out.summary["failure_kinds"] == {"invalid_json": 2}
    for qid, g in out.run.groupby("question_id"):
        assert g.sort_values("rank")["passage_id"].tolist() == \
            dense[dense["question_id"] == qid].sort_values("rank")["passage_id"].tolist()
