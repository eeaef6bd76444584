"""Per-question flows on Dask (issue 61): the workers build the method's retriever and LLM
client from a small spec (:class:`flows.method.MethodSpec`), so an LLM method (EviReform, the
scripted model) and a graph method (HippoRAG 2 on its LLM-free index, LLM filter at query
time) give on two Dask workers the run, trace and LLM usage the thread runner gives; progress
lines still come from the flow. One local cluster of two worker processes, started apart from
the flows, serves the module; the flows reach it by its address (``orchestration.dask_address``).
A cluster the task runner starts itself (``dask_n_workers``) runs dense retrieval in
``tests/flows/test_flows.py``."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from evichain.config import EmbedParams, LLMParams, OrchestrationParams, Params, parse_params
from evichain.io import read_parquet, write_parquet
from evichain.methods.graph.params import GraphParams
from evichain.paths import DatasetPaths
from flows.method import MethodOutput
from tests.fixtures import scripted_llm
from tests.fixtures.lothair import sentence_index, write_jsonl, write_user_corpus
from tests.flows import test_graph_flow
from tests.flows.test_graph_flow import PASSAGES, QUESTIONS
from tests.flows.test_user_run import _invoke

pytestmark = pytest.mark.slow

RESPONDER = "tests.flows.test_dask:respond"
"""The scripted model as workers find it (``EVICHAIN_SCRIPTED_LLM``: a spec carries it)."""


def respond(messages: list[dict[str, Any]], model: str) -> str:
    """EviReform's prompts (:mod:`tests.fixtures.scripted_llm`), else the graph methods'
    (:func:`tests.flows.test_graph_flow.respond`)."""
    try:
        return scripted_llm.respond(messages, model)
    except ValueError:
        return test_graph_flow.respond(messages, model)


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A local Dask cluster of two single-threaded worker processes; its scheduler's address."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as running:
        yield running.scheduler_address


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> DatasetPaths:
    """The graph tests' five passages and two questions, with the EviReform sentence index."""
    root = tmp_path_factory.mktemp("dask")
    corpus = pd.DataFrame(PASSAGES, columns=["passage_id", "title", "text"])
    props, entities, incidence = sentence_index(corpus)
    out = DatasetPaths("toy", root=root / "artifacts")
    for table, path in ((corpus, out.corpus), (QUESTIONS, out.questions),
                        (props, out.index_file("propositions.parquet")),
                        (entities, out.index_file("entities.parquet")),
                        (incidence, out.index_file("incidence.parquet"))):
        write_parquet(table, path)
    return out


@pytest.fixture()
def scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scripted model named in the environment (what a worker reads)."""
    monkeypatch.setenv("EVICHAIN_SCRIPTED_LLM", RESPONDER)


def whole_params(orch: OrchestrationParams) -> Params:
    """Default params with the scripted model, the LLM-free OpenIE, top 4 and ``orch``."""
    base = parse_params({})
    return base.model_copy(update={
        "llm": LLMParams(model="scripted/dask", backoff_base_s=0.0, max_retries=0),
        "graph": GraphParams(top_k=4, openie="propositions"), "embed": EmbedParams(),
        "orchestration": orch})


def run(paths: DatasetPaths, method: str, orch: OrchestrationParams, cache: Path,
        monkeypatch: pytest.MonkeyPatch) -> MethodOutput:
    """``method`` through :func:`flows.method.run_method` on the runner of ``orch``, on an LLM
    cache of its own (every run asks the model afresh)."""
    from flows.method import run_method

    monkeypatch.setenv("EVICHAIN_LLM_CACHE", str(cache))
    return run_method(paths, method, None, whole_params(orch), stage=f"t-{method}")


THREADS = OrchestrationParams(task_runner="thread", max_workers=2)


def assert_same_run(on_dask: MethodOutput, on_threads: MethodOutput) -> None:
    """The same ranking (scores within 1e-5: the embedder's float noise between processes),
    trace and LLM usage."""
    for out in (on_dask, on_threads):
        out.run.sort_values(["question_id", "rank"], inplace=True, ignore_index=True)
    pd.testing.assert_frame_equal(on_dask.run.drop(columns="score"),
                                  on_threads.run.drop(columns="score"))
    assert on_dask.run["score"].tolist() == pytest.approx(on_threads.run["score"].tolist(), abs=1e-5)
    pd.testing.assert_frame_equal(on_dask.trace, on_threads.trace)
    assert on_dask.summary["llm_usage"] == on_threads.summary["llm_usage"]
    assert on_dask.tokens == on_threads.tokens


@pytest.mark.parametrize("method", ["evireform", "hipporag2"])
def test_method_on_two_dask_workers_equals_the_thread_runner(
        method: str, cluster: str, paths: DatasetPaths, scripted: None, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    on_dask = run(paths, method, OrchestrationParams(task_runner="dask", dask_address=cluster),
                  tmp_path / "dask.sqlite", monkeypatch)
    on_threads = run(paths, method, THREADS, tmp_path / "threads.sqlite", monkeypatch)
    assert_same_run(on_dask, on_threads)
    assert on_dask.summary["llm_usage"]["calls"] > 0 and on_dask.summary["questions"] == 2
    assert on_dask.trace["question_id"].tolist() == ["q1", "q2"]


def test_questions_spread_over_both_workers_and_progress_is_logged(
        cluster: str, paths: DatasetPaths, scripted: None, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Twelve questions, one task each, answered by both worker processes: their LLM usage
    summed is the thread runner's, and the flow logs the progress of the fan-out."""
    import flows.common as common
    import flows.questions as questions

    lines: list[str] = []
    monkeypatch.setattr(common, "get_run_logger", lambda: _Log(lines))
    shards: list[questions.WorkerShard] = []
    usage = questions.worker_usage
    monkeypatch.setattr(questions, "worker_usage", lambda parts: shards.extend(parts) or usage(parts))
    many = DatasetPaths("many", root=paths.root)
    shutil.copytree(paths.dir, many.dir, dirs_exist_ok=True)
    write_parquet(pd.concat([QUESTIONS.assign(question_id=QUESTIONS["question_id"] + f"-{i}",
                                              question=QUESTIONS["question"] + f" ({i})")
                             for i in range(6)], ignore_index=True), many.questions)  # no shared prompt
    on_dask = run(many, "hipporag2", OrchestrationParams(task_runner="dask", dask_address=cluster),
                  tmp_path / "dask.sqlite", monkeypatch)
    assert len(shards) == 12 and len({s.process for s in shards}) == len({s.build for s in shards}) == 2
    assert any(line.startswith("hipporag2 questions: 12/12 (100%)") for line in lines)
    on_threads = run(many, "hipporag2", THREADS, tmp_path / "threads.sqlite", monkeypatch)
    assert_same_run(on_dask, on_threads)
    assert on_dask.summary["llm_usage"]["calls"] >= 12


def test_worker_usage_sums_the_last_total_of_every_build() -> None:
    """Running totals: the largest of each build counts once; a build without clients adds
    nothing; no client anywhere is ``{"calls": 0}``."""
    from flows.questions import WorkerShard, worker_usage

    def shard(build: str, requests: int, tokens: int) -> WorkerShard:
        return WorkerShard([], "host:1", build, {"requests": requests, "calls": requests,
                                                  "prompt_tokens": tokens})

    usage = worker_usage([shard("a", 2, 30), shard("b", 1, 10), shard("a", 4, 70),
                          shard("b", 3, 25), WorkerShard([], "host:2", "c", {"calls": 0})])
    assert (usage["requests"], usage["calls"], usage["prompt_tokens"]) == (7, 7, 95)
    assert usage["cache_hits"] == 0
    assert worker_usage([WorkerShard([], "host:2", "c", {"calls": 0})]) == {"calls": 0}


@pytest.fixture()
def user_run_files(tmp_path: Path) -> dict[str, Path]:
    """``evichain run``'s input files: the user-file passages of :mod:`tests.fixtures.lothair`, two questions
    with gold passages and a params file (the scripted model, the sentence index)."""
    corpus = write_user_corpus(tmp_path / "corpus.jsonl")
    questions = write_jsonl(tmp_path / "questions.jsonl", [
        {"id": "q1", "question": "When did Lothair II's mother die?"},
        {"id": "q2", "question": "Which lake lies on the north side of the Alps?"}])
    gold = write_jsonl(tmp_path / "gold.jsonl", [{"question_id": "q1", "passage_id": "d2"},
                                            {"question_id": "q2", "passage_id": "d5"}])
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"llm": {"model": "scripted/user-run", "backoff_base_s": 0.0},
                                      "evireform": {"index": {"extractor": "sentences"}}}),
                      encoding="utf-8")
    return {"corpus": corpus, "questions": questions, "gold": gold, "params": params,
            "out": tmp_path / "out"}


def test_evichain_run_on_dask(user_run_files: dict[str, Path], cluster: str, scripted: None) -> None:
    """``evichain run`` with ``orchestration.task_runner: dask`` (issue 61's failing route): the
    run, its trace and its LLM tokens, and the thread runner's ranking."""
    def invoke(orchestration: dict[str, Any], out: str) -> pd.DataFrame:
        params = yaml.safe_load(user_run_files["params"].read_text(encoding="utf-8"))
        user_run_files["params"].write_text(yaml.safe_dump({**params, "orchestration": orchestration}),
                                        encoding="utf-8")
        files = {**user_run_files, "out": user_run_files["out"].with_name(out)}
        result = _invoke(files, "--method", "evireform", "--variant", "full")
        assert result.exit_code == 0, result.output
        assert "llm tokens:" in result.output
        trace = read_parquet(files["out"] / "evireform-full-trace.parquet")
        assert len(trace) == 2 and int(trace["sel_prompt_tokens"].sum()) > 0
        return read_parquet(files["out"] / "evireform-full.parquet").drop(columns="score")

    on_dask = invoke({"task_runner": "dask", "dask_address": cluster}, "out-dask")
    pd.testing.assert_frame_equal(on_dask, invoke({"task_runner": "thread", "max_workers": 2},
                                                  "out-threads"))


class _Log:
    """A run logger that keeps its lines."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def info(self, msg: str, *args: Any) -> None:
        self.lines.append(msg % args)
