"""The one retrieval flow (:mod:`flows.method`, one Prefect task per question) for every
iterative method, a warm re-run with no
LLM calls and identical tables, BM25 as the per-step retriever, and the DVC stage's outputs."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from evichain.config import (
    BM25Params,
    EmbedParams,
    LLMParams,
    OrchestrationParams,
    Params,
    parse_params,
)
from evichain.io import read_json, read_parquet, write_parquet
from evichain.llm.scripted import set_responder
from evichain.methods.iterative.common import EVIDENCE_COLUMNS
from evichain.methods.iterative.params import (
    GRAPH_METHODS,
    METHODS,
    IterativeParams,
    retrieve_stage_name,
)
from evichain.paths import DatasetPaths
from stages.code_digest import digest_path, listed_files, load_stages
from tests.methods.iterative.test_iterative_methods import (
    QUESTION,
    corpus,
    index_tables,
)

QUESTIONS = pd.DataFrame({"question_id": ["q1", "q2"], "question": [QUESTION, "Where is Erstein?"],
                          "gold_passage_ids": [["d0", "d1"], ["d4"]]})


def respond(messages: list[dict[str, Any]], model: str) -> str:
    """A well-behaved scripted model for every prompt of the four methods."""
    system = messages[0]["content"]
    data = json.loads(messages[1]["content"])
    if system.startswith("Answer the question using only"):
        return json.dumps({"answer": data["evidence"][0]["title"]})
    if system.startswith("You are the one-sentence"):
        return json.dumps({"reasoning_step": "So the answer is: 851.", "answer": "851"})
    if system.startswith("You answer a multi-hop question by self-ask"):
        if data["steps"]:
            return json.dumps({"follow_up_needed": False, "follow_up": None, "final_answer": "851"})
        return json.dumps({"follow_up_needed": True, "follow_up": data["question"], "final_answer": None})
    if system.startswith("You are a sentence-level"):
        return json.dumps({"evidence_global_ids": [1]})
    if system.startswith("You are a QA/RAG"):
        return json.dumps({"sufficient": True, "gap_items": []})
    if system.startswith("Read the retrieved passages"):
        return json.dumps({"proximal_triples": [["Lothair II", "son of", "Ermengarde of Tours"]]})
    if system.startswith("Update a compact memory"):
        return json.dumps({"gist_triples": [["Ermengarde of Tours", "died on", "20 March 851"]]})
    if system.startswith("Judge whether"):
        return json.dumps({"answerable": True, "next_query": None})
    raise AssertionError(f"unexpected prompt {system[:50]!r}")


def write_dataset(root: Path) -> DatasetPaths:
    paths = DatasetPaths("toy", root=root)
    props, entities, incidence = index_tables()
    for table, path in ((corpus(), paths.corpus), (QUESTIONS, paths.questions),
                        (props.sample(frac=1.0, random_state=1), paths.index_file("propositions.parquet")),
                        (entities, paths.index_file("entities.parquet")),
                        (incidence, paths.index_file("incidence.parquet"))):
        write_parquet(table, path)
    return paths


def iterative_params(params: IterativeParams, llm: LLMParams, orch: OrchestrationParams) -> Params:
    """The whole params of an iterative run: ``iterative``, ``llm`` and ``orchestration``
    replaced, default embedder and BM25."""
    base = parse_params({})
    return base.model_copy(update={
        "iterative": params, "llm": llm, "embed": EmbedParams(), "orchestration": orch,
        "retrieval": base.retrieval.model_copy(update={"bm25": BM25Params()})})


def iterative_flow(paths: DatasetPaths, method: str, params: IterativeParams, llm: LLMParams,
                   orch: OrchestrationParams) -> Any:
    """``method`` through the one retrieval flow (:func:`flows.method.retrieval_flow`)."""
    from flows.method import retrieval_flow

    return retrieval_flow(paths, method, None, iterative_params(params, llm, orch),
                          stage="retrieve_iterative")


@pytest.mark.parametrize("method", METHODS)
def test_flow_tables_for_every_method(tmp_path: Path, method: str) -> None:
    paths = write_dataset(tmp_path / "artifacts")
    args = (paths, method, IterativeParams(), LLMParams(model="scripted/flow", backoff_base_s=0.0),
            OrchestrationParams(max_workers=2))
    set_responder(respond)
    first = iterative_flow(*args)
    assert list(first.run.columns) == ["question_id", "rank", "passage_id", "score"]
    assert list(first.evidence.columns) == EVIDENCE_COLUMNS
    assert sorted(first.trace["question_id"]) == ["q1", "q2"]
    assert set(first.evidence["question_id"]) == {"q1", "q2"}
    s = first.summary
    assert s["method"] == method and s["questions"] == 2 and s["stop_reasons"]["answered"] == 2 and s["llm_failures"] == 0
    assert s["llm_usage"]["calls"] == first.trace["n_llm_calls"].sum() > 0
    assert s["per_question"]["prompt_tokens_mean"] == first.trace["prompt_tokens"].mean()
    set_responder(lambda m, model: (_ for _ in ()).throw(AssertionError("LLM called on a warm cache")))
    second = iterative_flow(*args)
    assert second.summary["llm_usage"]["calls"] == 0
    pd.testing.assert_frame_equal(first.run, second.run)
    assert first.evidence.equals(second.evidence)
    pd.testing.assert_frame_equal(first.trace, second.trace)             # tokens from the cache too


@pytest.mark.parametrize("concurrency", [1, 2])
def test_steps_of_one_question_reach_a_single_slot_back_to_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, concurrency: int) -> None:
    """Two IRCoT questions run in two task threads, each in two steps, and every retrieval
    takes 0.2 s. With one slot (concurrency 1) the server sees q1, q1, q2, q2 (each step extends
    the previous prompt, whose cached prefix the server reuses); without the sequence lock the
    other question's waiting call takes the slot while q1 retrieves between its steps. With two
    slots nothing is held and the steps interleave."""
    from evichain.methods.iterative.common import Episode

    paths = write_dataset(tmp_path / "artifacts")
    order: list[str] = []
    slow_search = Episode.retrieve

    def retrieve(self: Episode, *args: Any, **kwargs: Any) -> list[int]:
        time.sleep(0.2)
        return slow_search(self, *args, **kwargs)

    def two_steps(messages: list[dict[str, Any]], model: str) -> str:
        data = json.loads(messages[1]["content"])
        order.append(data["question"])
        if data["reasoning_so_far"]:
            return json.dumps({"reasoning_step": "So the answer is: 851.", "answer": "851"})
        time.sleep(0.1)
        return json.dumps({"reasoning_step": "Lothair II's mother was Ermengarde.", "answer": None})

    monkeypatch.setattr(Episode, "retrieve", retrieve)
    set_responder(two_steps)
    llm = LLMParams(model=f"scripted/sequence-{concurrency}", concurrency=concurrency,
                    backoff_base_s=0.0, max_retries=0)
    out = iterative_flow(paths, "ircot", IterativeParams(), llm, OrchestrationParams(max_workers=2))
    assert (out.trace["stop_reason"] == "answered").all() and len(order) == 4
    switches = sum(a != b for a, b in zip(order, order[1:]))
    assert switches == 1 if concurrency == 1 else switches >= 2


def test_bm25_retriever_and_stage_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from stages.retrieve_method import app

    monkeypatch.chdir(tmp_path)
    write_dataset(Path("artifacts"))
    params = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())
    params["llm"]["model"] = "scripted/stage"
    params["iterative"] = {"retriever": "bm25", "ircot": {"k": 2}}
    Path("params.yaml").write_text(yaml.safe_dump(params))
    set_responder(respond)
    result = CliRunner().invoke(app, ["--dataset", "toy", "--method", "ircot"])
    assert result.exit_code == 0, result.output
    paths = DatasetPaths("toy")
    run, trace, evidence = (read_parquet(p) for p in (paths.run("ircot"), paths.trace("ircot"),
                                                      paths.evidence("ircot")))
    usage = read_json(paths.usage("retrieve-ircot"))
    assert usage["method"] == "ircot" and usage["questions"] == 2 and usage["llm_usage"]["calls"] == 2
    assert (trace["stop_reason"] == "answered").all() and run.groupby("question_id").size().max() == 2
    erstein = trace.set_index("question_id").loc["q2", "step_retrieved_ids"]
    assert list(erstein[0])[0] == "d4"                                   # BM25 on "Erstein"
    assert evidence["position"].tolist() == [1, 2] * 2
    bad = CliRunner().invoke(app, ["--dataset", "toy", "--method", "flare"])
    assert bad.exit_code == 2


def test_stage_fails_when_too_many_episodes_end_on_an_llm_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Per request 1 failure of 4 passes a 0.4 limit, but 1 of 2 episodes ending on it does not;
    the tables are written first (the failure is a trace row)."""
    from typer.testing import CliRunner

    from stages.retrieve_method import app

    monkeypatch.chdir(tmp_path)
    write_dataset(Path("artifacts"))
    params = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())
    params["llm"].update(model="scripted/stage-fail", max_failure_rate=0.4)
    params["iterative"] = {"retriever": "bm25", "ircot": {"k": 2}}
    Path("params.yaml").write_text(yaml.safe_dump(params))

    def erstein_fails(messages: list[dict[str, Any]], model: str) -> str:
        asks = messages[0]["content"].startswith("You answer a multi-hop question by self-ask")
        erstein = json.loads(messages[1]["content"]).get("question") == "Where is Erstein?"
        return "not json" if asks and erstein else respond(messages, model)

    set_responder(erstein_fails)
    result = CliRunner().invoke(app, ["--dataset", "toy", "--method", "self_ask"])
    assert result.exit_code == 2
    assert "1 of 2 questions failed (50.0% > llm.max_failure_rate 40.0%)" in result.output
    usage = read_json(DatasetPaths("toy").usage("retrieve-self_ask"))
    assert usage["llm_failures"] == 1 and usage["llm_usage"]["failures"] == 1
    assert usage["llm_usage"]["requests"] >= 3
    trace = read_parquet(DatasetPaths("toy").trace("self_ask")).set_index("question_id")
    assert trace.loc["q2", "stop_reason"] == "llm_failure"
    assert DatasetPaths("toy").evidence("self_ask").exists()


def _iterative_matrices() -> dict[str, dict[str, Any]]:
    stages = yaml.safe_load((Path(__file__).resolve().parents[2] / "dvc.yaml").read_text())["stages"]
    return {name: stages[name] for name in ("retrieve_iterative", "retrieve_iterative_graph")}


def test_dvc_retrieve_stages_split_by_what_each_method_reads() -> None:
    """Only GeAR's stage depends on the EviReform index tables; both matrices list iterative.methods."""
    stages = _iterative_matrices()
    text, graph = (stages[n]["matrix"]["method"] for n in ("retrieve_iterative", "retrieve_iterative_graph"))
    params = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())
    assert sorted(text + graph) == sorted(params["iterative"]["methods"]) == sorted(METHODS)
    assert graph == ["gear"] == sorted(GRAPH_METHODS)
    assert retrieve_stage_name("musique", "gear") == "retrieve_iterative_graph@musique-gear"
    assert retrieve_stage_name("musique", "ircot") == "retrieve_iterative@musique-ircot"
    index_deps = [d for d in stages["retrieve_iterative_graph"]["deps"] if "/index/" in d]
    assert len(index_deps) == 3
    assert not [d for d in stages["retrieve_iterative"]["deps"] if "/index/" in d]
    # Each template depends on its own code digest; the two digests cover the same source files.
    all_stages = load_stages(Path(__file__).resolve().parents[2] / "dvc.yaml")
    # ... and on its own params file per method (params_<template>, a matrix over the method).
    for name in stages:
        assert [d for d in stages[name]["deps"] if not d.startswith("artifacts/")] == [
            f"pipeline/params/{name}/${{item.method}}.json", str(digest_path(name))]
        assert "params" not in stages[name]
    assert listed_files("retrieve_iterative", all_stages) == listed_files("retrieve_iterative_graph", all_stages)
    keys = {n: all_stages[f"params_{n}"]["params"] for n in stages}
    assert keys["retrieve_iterative"] == keys["retrieve_iterative_graph"]
    assert "iterative.${item.method}" in keys["retrieve_iterative"]


@pytest.mark.parametrize("method", [m for m in METHODS if m != "gear"])
def test_text_methods_need_no_index_tables(tmp_path: Path, method: str) -> None:
    """What the text-only stage declares is all it reads: no proposition/entity tables on disk."""
    paths = DatasetPaths("toy", root=tmp_path / "artifacts")
    write_parquet(corpus(), paths.corpus)
    write_parquet(QUESTIONS, paths.questions)
    set_responder(respond)
    out = iterative_flow(paths, method, IterativeParams(), LLMParams(model="scripted/split"),
                         OrchestrationParams(max_workers=1))
    assert not paths.index_file("propositions.parquet").exists()
    assert set(out.trace["question_id"]) == {"q1", "q2"}
