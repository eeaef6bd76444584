"""HyDE, query2doc and LameR on a tiny corpus with a scripted LLM and real MiniLM embeddings:
the HyDE vector is the mean (numerically), per-sample seeds give one cache key per sample,
query2doc's query construction, LameR's two BM25 passes, partial and total generation failures
(fallback to the question alone only as ``on_all_failed`` says), and the summary of the one
retrieval flow (:mod:`flows.method`)."""

from __future__ import annotations

import itertools
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest

from evichain.config import BM25Params, EmbedParams, LLMParams, OrchestrationParams, RetrievalParams
from evichain.embed import get_embedder
from evichain.io import write_parquet
from evichain.llm import LLMCache, LLMClient
from evichain.llm.scripted import set_responder
from evichain.methods.expansion.generate import generate, sample_params
from evichain.methods.expansion.hyde import HyDE, hyde_vector
from evichain.methods.expansion.lamer import LameR, augmented_query
from evichain.methods.expansion.params import (ExpansionParams, HydeParams, LameRParams,
                                               Query2DocParams, check_method)
from evichain.methods.expansion.prompts import HYDE, QUERY2DOC_EXAMPLES
from evichain.methods.expansion.query2doc import Query2Doc, dense_query, sparse_query
from evichain.methods.expansion.search import CorpusSearch
from evichain.paths import DatasetPaths
from evichain.retrieval.bm25 import BM25Index
from evichain.retrieval.run import format_passages, passage_texts
from tests.fixtures.lothair import QUESTION, SIX_PASSAGES as PASSAGES

ANSWER = "Ermengarde of Tours, mother of Lothair II, died on 20 March 851 at Erstein abbey."
CORPUS = pl.DataFrame(PASSAGES, schema=["passage_id", "title", "text"], orient="row")


def search() -> CorpusSearch:
    embedder = get_embedder(EmbedParams())
    return CorpusSearch(CORPUS["passage_id"].to_list(), BM25Index(CORPUS, BM25Params()),
                        embedder.encode(format_passages(CORPUS, "{title}\n{text}")), embedder.encode)


def clients(tmp_path: Path, temperature: float, n: int, name: str = "scripted/expansion") -> list[LLMClient]:
    llm = LLMParams(model=name, backoff_base_s=0.0, max_retries=0)
    cache = LLMCache(tmp_path / "llm.sqlite")
    return [LLMClient(p, cache=cache) for p in sample_params(llm, temperature, n)]


def scripted(texts: list[str | None], seen: list[dict] | None = None) -> Callable[[list[dict], str], str]:
    """Answers the calls in turn (cycling); None = a malformed reply."""
    turn = itertools.cycle(texts)

    def respond(messages: list[dict], model: str) -> str:
        if seen is not None and messages[-1]["role"] == "user" and len(messages) == 2:
            seen.append(json.loads(messages[-1]["content"]))
        text = next(turn)
        return "Sure! Here is a passage:" if text is None else json.dumps({"passage": text})

    return respond


def usage(cs: list[LLMClient]) -> tuple[int, int]:
    return sum(c.usage.calls for c in cs), sum(c.usage.cache_hits for c in cs)


@pytest.mark.parametrize("concurrency", [1, 3])
def test_samples_of_one_question_reach_a_single_slot_back_to_back(tmp_path: Path,
                                                                   concurrency: int) -> None:
    """Four questions generate in parallel threads; with one slot (concurrency 1) the server
    sees each question's three identical prompts consecutively (its prompt cache is reused);
    with three slots nothing is held and every call is still made once."""
    order: list[str] = []
    entered = threading.Barrier(4, timeout=5)

    def respond(messages: list[dict], model: str) -> str:
        order.append(messages[-1]["content"])
        time.sleep(0.01)
        return json.dumps({"passage": "a passage"})

    set_responder(respond)
    llm = LLMParams(model=f"scripted/slots-{concurrency}", concurrency=concurrency,
                    backoff_base_s=0.0, max_retries=0)
    cache = LLMCache(tmp_path / "llm.sqlite")
    sample_clients = [LLMClient(p, cache=cache) for p in sample_params(llm, 0.7, 3)]

    def question(i: int) -> list[str]:
        entered.wait()
        return [g.status for g in generate(sample_clients, HYDE, None, data=json.dumps(f"q{i}"))]

    with ThreadPoolExecutor(max_workers=4) as pool:
        statuses = list(pool.map(question, range(4)))
    assert statuses == [["ok"] * 3] * 4 and len(order) == 12
    assert sorted(order) == sorted(json.dumps(f"q{i}") for i in range(4) for _ in range(3))
    if concurrency == 1:
        runs = [order[k:k + 3] for k in range(0, 12, 3)]
        assert all(len(set(run)) == 1 for run in runs) and len({run[0] for run in runs}) == 4


# ----------------------------------------------------------------------------- HyDE
def test_hyde_vector_is_the_mean_of_question_and_documents() -> None:
    q = np.array([1.0, 0.0, 0.0])
    docs = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 3.0, 0.0]])
    assert np.allclose(hyde_vector(q, docs), [0.25, 1.0, 0.25])
    assert np.allclose(hyde_vector(None, docs), [0.0, 4 / 3, 1 / 3])
    assert np.allclose(hyde_vector(q, np.zeros((0, 3))), q)
    with pytest.raises(ValueError):
        hyde_vector(None, np.zeros((0, 3)))


def test_hyde_samples_with_distinct_seeds_and_ranks_by_the_mean_vector(tmp_path: Path) -> None:
    docs = [ANSWER, "Lothair II's mother was Ermengarde.", "She died in the year 851."]
    set_responder(scripted(docs))
    params = ExpansionParams(top_k=6, hyde=HydeParams(n_samples=3))
    cs = clients(tmp_path, 0.7, 3)
    s = search()
    out = HyDE(cs, s, params).retrieve("q1", QUESTION)
    t = out.trace
    assert usage(cs) == (3, 0)                                   # three cache keys, three calls
    assert t["seeds"] == [0, 1, 2] and all(c.params.temperature == 0.7 for c in cs)
    assert t["generated"] == docs and t["status"] == "ok" and t["n_vectors_averaged"] == 4
    encoded = get_embedder(EmbedParams()).encode([QUESTION, *docs])
    expected = s.passage_vectors @ encoded.mean(axis=0)
    assert np.allclose([r[3] for r in out.rows], np.sort(expected)[::-1], atol=1e-5)
    assert [r[2] for r in out.rows] == [PASSAGES[i][0] for i in np.argsort(-expected, kind="stable")]
    set_responder(scripted([None]))                              # a warm re-run calls nothing
    warm = clients(tmp_path, 0.7, 3)
    again = HyDE(warm, s, params).retrieve("q1", QUESTION)
    assert usage(warm) == (0, 3) and again.rows == out.rows and again.trace == t


def test_hyde_proceeds_with_the_generations_it_has(tmp_path: Path) -> None:
    set_responder(scripted([None, None, ANSWER, ANSWER]))       # sample 0: reply + repair fail
    cs = clients(tmp_path, 0.7, 3)
    t = HyDE(cs, search(), ExpansionParams(hyde=HydeParams(n_samples=3))).retrieve("q1", QUESTION).trace
    assert t["status"] == "partial" and not t["fallback"]
    assert (t["n_generated"], t["n_failed"], t["error_kinds"]) == (2, 1, ["invalid_json"])
    assert t["n_vectors_averaged"] == 3


def test_all_failed_falls_back_to_the_question_only_when_told(tmp_path: Path) -> None:
    s = search()
    set_responder(scripted([None]))
    fallback = HyDE(clients(tmp_path, 0.7, 2), s, ExpansionParams(hyde=HydeParams(n_samples=2)))
    out = fallback.retrieve("q1", QUESTION)
    assert out.trace["status"] == "failed" and out.trace["fallback"]
    assert out.rows == s.dense("q1", QUESTION, 20)                # the plain dense run of q
    empty = HyDE(clients(tmp_path, 0.7, 2, "scripted/empty"), s,
                 ExpansionParams(on_all_failed="empty", hyde=HydeParams(n_samples=2)))
    out = empty.retrieve("q1", QUESTION)
    assert out.rows == [] and out.trace["status"] == "failed" and not out.trace["fallback"]


# ----------------------------------------------------------------------------- query2doc
def test_query2doc_query_construction() -> None:
    assert sparse_query("who?", "doc text", 5) == "who? who? who? who? who? doc text"
    assert sparse_query("who?", None, 2) == "who? who?"
    assert dense_query("who?", "doc text", " [SEP] ") == "who? [SEP] doc text"
    assert dense_query("who?", None, " [SEP] ") == "who?"


@pytest.mark.parametrize("retriever", ["bm25", "dense"])
def test_query2doc_searches_with_the_expanded_query(tmp_path: Path, retriever: str) -> None:
    seen: list[dict] = []
    set_responder(scripted([ANSWER], seen))
    s = search()
    params = ExpansionParams(query2doc=Query2DocParams(retriever=retriever))
    out = Query2Doc(clients(tmp_path, 0.0, 1), s, params).retrieve("q1", QUESTION)
    assert seen[0]["query"] == QUESTION
    assert [(e["query"], e["passage"]) for e in seen[0]["examples"]] == list(QUERY2DOC_EXAMPLES)
    query = out.trace["expanded_query"]
    if retriever == "bm25":
        assert query == " ".join([QUESTION] * 5 + [ANSWER]) and out.rows == s.bm25("q1", query, 20)
    else:
        assert query == f"{QUESTION} [SEP] {ANSWER}" and out.rows == s.dense("q1", query, 20)
    assert out.rows[0][2] == "d1" and out.trace["retriever"] == retriever


# ----------------------------------------------------------------------------- LameR
def test_augmented_query_layouts() -> None:
    assert augmented_query("q", ["a1", "a2"], "interleaved") == "q a1 q a2"
    assert augmented_query("q", ["a1", "a2"], "appended") == "q a1 a2"
    assert augmented_query("q", [], "interleaved") == "q"


def test_lamer_prompts_with_bm25_candidates_then_searches_again(tmp_path: Path) -> None:
    seen: list[dict] = []
    answers = [ANSWER, "Ermengarde died at Erstein in 851."]
    set_responder(scripted(answers, seen))
    s = search()
    params = ExpansionParams(lamer=LameRParams(n_candidates=3, n_answers=2, candidate_words=6))
    cs = clients(tmp_path, 0.7, 2)
    out = LameR(cs, s, params, passage_texts(CORPUS)).retrieve("q1", QUESTION)
    first = [r[2] for r in s.bm25("q1", QUESTION, 3)]
    assert out.trace["candidate_ids"] == first and usage(cs) == (2, 0)
    title, text = passage_texts(CORPUS)[first[0]]
    assert seen[0]["question"] == QUESTION and len(seen[0]["passages"]) == 3
    assert seen[0]["passages"][0] == f"1. {title}: {' '.join(text.split()[:6])}"
    query = f"{QUESTION} {answers[0]} {QUESTION} {answers[1]}"
    assert out.trace["expanded_query"] == query and out.rows == s.bm25("q1", query, 20)
    assert out.rows[0][2] == "d1" and "d1" not in first[:1]


# ----------------------------------------------------------------------------- flow
def test_check_method() -> None:
    assert check_method("lamer") == "lamer"
    with pytest.raises(ValueError, match="unknown expansion method"):
        check_method("rm3")


@pytest.mark.parametrize("method", ["hyde", "query2doc", "lamer"])
def test_flow_writes_run_trace_and_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          method: str) -> None:
    from evichain.config import parse_params
    from flows.method import retrieval_flow

    monkeypatch.setenv("EVICHAIN_LLM_CACHE", str(tmp_path / "flow-llm.sqlite"))
    paths = DatasetPaths("toy", root=tmp_path / "artifacts")
    write_parquet(CORPUS, paths.corpus)
    write_parquet(pd.DataFrame({"question_id": ["q1", "q2"], "question": [QUESTION, "Where is Erstein?"],
                                "gold_passage_ids": [["d0", "d1"], ["d3"]]}), paths.questions)
    set_responder(scripted([ANSWER, None, None]))                 # every second sample fails
    params = ExpansionParams(top_k=4, hyde=HydeParams(n_samples=2), lamer=LameRParams(n_answers=2))
    whole = parse_params({}).model_copy(update={
        "expansion": params, "retrieval": RetrievalParams(), "embed": EmbedParams(),
        "llm": LLMParams(model=f"scripted/flow-{method}", backoff_base_s=0.0, max_retries=0),
        "orchestration": OrchestrationParams(max_workers=1)})
    out = retrieval_flow(paths, method, None, whole, stage=f"test-expansion-{method}")
    s = out.summary
    assert s["questions"] == 2 and s["method"] == method and s["generations_requested"] == \
        int(out.trace["n_requested"].sum())
    assert s["generations_ok"] + s["generations_failed"] == s["generations_requested"]
    assert s["llm_usage"]["calls"] >= s["generations_requested"] and s["prompt_tokens"] > 0
    assert sum(s["status"].values()) == 2 and s["fallbacks"] == int(out.trace["fallback"].sum())
    assert list(out.run.columns) == ["question_id", "rank", "passage_id", "score"]
    assert out.run.groupby("question_id").size().max() <= 4
    for col in ("generated", "seeds", "n_failed", "error_kinds", "status", "fallback",
                "prompt_tokens", "completion_tokens"):
        assert col in out.trace.columns
