"""Flows: dense retrieval on a local cluster the Dask task runner starts itself
(``dask_n_workers``: the workers build the retriever, :mod:`tests.flows.test_dask` has the LLM
and graph methods) gives the thread pool's run; the reader flow; progress in completion order."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from evichain.config import DenseParams, EmbedParams, LLMParams, OrchestrationParams
from evichain.io import write_parquet
from evichain.llm.scripted import set_responder
from tests.fixtures.scripted_llm import respond
from tests.retrieval.test_retrieval import CORPUS

QUESTIONS = pd.DataFrame({"question_id": ["q1", "q2"],
                          "question": ["Who was the mother of Lothair II?",
                                       "What is the capital of France?"]})


@pytest.fixture()
def tables(tmp_path: Path) -> tuple[Path, Path]:
    return (write_parquet(CORPUS, tmp_path / "corpus.parquet"),
            write_parquet(QUESTIONS, tmp_path / "q.parquet"))


@pytest.mark.slow
def test_dense_method_on_local_dask_cluster_of_two_workers(tmp_path: Path) -> None:
    from evichain.config import parse_params
    from evichain.paths import DatasetPaths
    from flows.method import MethodOutput, run_method

    paths = DatasetPaths("toy", root=tmp_path / "artifacts")
    write_parquet(CORPUS, paths.corpus)
    write_parquet(QUESTIONS.assign(gold_passage_ids=[["p1"], ["p3"]]), paths.questions)
    base = parse_params({})
    dense = base.retrieval.model_copy(update={"dense": DenseParams(top_k=3)})

    def run(orch: OrchestrationParams) -> MethodOutput:
        params = base.model_copy(update={"orchestration": orch, "retrieval": dense,
                                         "embed": EmbedParams()})
        return run_method(paths, "dense", None, params, stage="t-dense")

    on_dask = run(OrchestrationParams(task_runner="dask", dask_n_workers=2))
    on_threads = run(OrchestrationParams(task_runner="thread", max_workers=2))
    pd.testing.assert_frame_equal(on_dask.run, on_threads.run)
    assert on_dask.run.groupby("question_id").size().tolist() == [3, 3]
    assert on_dask.summary["llm_usage"] == on_threads.summary["llm_usage"] == {"calls": 0}


def test_read_flow_answers_and_records_failures(tables: tuple[Path, Path], tmp_path: Path) -> None:
    from flows.read import read_flow

    def flaky(messages: list[dict], model: str) -> str:
        if any("capital" in m["content"] for m in messages):
            return "this is not json"
        return respond(messages, model)

    set_responder(flaky)
    run = pd.DataFrame({"question_id": ["q1", "q2"], "rank": [1, 1], "passage_id": ["p1", "p3"],
                        "score": [1.0, 1.0]})
    run_path = write_parquet(run, tmp_path / "run.parquet")
    table, usage = read_flow(tables[1], tables[0], run_path, 5,
                             LLMParams(model="scripted/t", backoff_base_s=0), "read@test-dense")
    rows = table.set_index("question_id")
    assert rows.at["q1", "prediction"] == "Lothair II" and rows.at["q1", "status"] == "ok"
    assert rows.at["q2", "status"] == "failed" and pd.isna(rows.at["q2", "prediction"])
    assert rows.at["q2", "error_kind"] == "invalid_json"
    assert list(rows.at["q1", "context_passage_ids"]) == ["p1"]
    assert usage.calls == 3 and usage.failures == 1 and usage.repairs == 1


def test_collect_reports_progress_in_completion_order_and_returns_submission_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from prefect import flow, task

    import flows.common as common

    last_done = threading.Event()
    advanced: list[int] = []
    monkeypatch.setattr(common.Progress, "advance", lambda self, n=1: advanced.append(n))

    @task
    def work(i: int) -> int:
        if i == 0:  # the first task finishes only after the last one has been collected
            assert last_done.wait(30)
        return i

    @flow
    def fan_out() -> list[int]:
        futures = [work.submit(i) for i in range(3)]
        futures[2].wait()
        futures[1].wait()
        return common.collect(futures, "t", sizes=[10, 20, 30])

    def release_after_two() -> None:
        while len(advanced) < 2:
            threading.Event().wait(0.01)
        last_done.set()

    threading.Thread(target=release_after_two, daemon=True).start()
    threads = OrchestrationParams(task_runner="thread", max_workers=3)
    assert common.with_runner(fan_out, threads)() == [0, 1, 2]
    assert sorted(advanced[:2]) == [20, 30] and advanced[2] == 10
