"""Stage guards: a stage fails above its failure-rate param, after writing its tables."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import polars as pl
import pytest

import stages._common
from evichain.llm.failures import (
    check_failure_rate,
    failed_questions,
    llm_failure_counts,
)
from evichain.paths import DatasetPaths
from stages._common import write_method_outputs


def test_the_stages_and_evichain_run_share_one_rule() -> None:
    assert stages._common.check_failure_rate is check_failure_rate      # re-exported for stages
    assert stages._common.failed_questions is failed_questions


def test_check_failure_rate_names_the_param_and_the_file() -> None:
    check_failure_rate(2, 10, 0.2, key="read.max_failure_rate", what="answers", see="qa.parquet")
    check_failure_rate(0, 0, 0.0, key="k", what="answers", see="x")   # nothing to fail
    with pytest.raises(RuntimeError) as err:
        check_failure_rate(3, 10, 0.2, key="read.max_failure_rate", what="answers", see="qa.parquet")
    assert str(err.value) == ("3 of 10 answers failed (30.0% > read.max_failure_rate 20.0%); "
                              "see qa.parquet")


def _method_output(failures: int, requests: int) -> SimpleNamespace:
    run = pd.DataFrame({"question_id": ["q2", "q1"], "rank": [1, 1], "passage_id": ["b", "a"],
                        "score": [1.0, 1.0]})
    trace = pd.DataFrame({"question_id": ["q2", "q1"], "fallback": [True, False]})
    usage = {"requests": requests, "failures": failures, "calls": requests}
    return SimpleNamespace(run=run, trace=trace, summary={"questions": 2, "llm_usage": usage})


def test_llm_method_stage_fails_above_llm_max_failure_rate_after_writing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    paths = DatasetPaths("toy")
    summary = write_method_outputs("toy", "m", "m", "retrieve-m", _method_output(1, 10), 0.2)
    assert summary["llm_usage"]["failures"] == 1
    with pytest.raises(RuntimeError, match=r"5 of 10 LLM requests failed .*llm.max_failure_rate"):
        write_method_outputs("toy", "m", "m", "retrieve-m", _method_output(5, 10), 0.2)
    assert pd.read_parquet(paths.run("m"))["question_id"].tolist() == ["q1", "q2"]   # written
    assert paths.usage("retrieve-m").exists()


def test_failed_questions_reads_every_methods_trace_convention() -> None:
    graph = pd.DataFrame({"status": ["ok", "failed", "ok"],
                          "filter_status": ["ok", "llm_timeout", "no_facts"],
                          "anchor_status": ["ok", "ok", "llm_invalid_json"]})
    assert failed_questions(graph) == 2                                     # one row counts once
    expansion = pd.DataFrame({"status": ["ok", "partial", "failed", "ok"]})
    assert failed_questions(expansion) == 2
    evireform = pd.DataFrame({"selection_status": ["ok", "top", "empty", "llm_replay_miss"],
                              "reformulation_status": ["no_evidence", "off", "ok", "ok"],
                              "judge_status": ["off", "llm_bad_request", "ok", "no_candidates"]})
    assert failed_questions(evireform) == 2
    cee = pd.DataFrame({"stop_reason": ["rounds", "summary_failed", "rounds"],
                        "llm_failures": [[], ["round2:summary:invalid_json"], None]})
    assert failed_questions(cee) == 1
    assert failed_questions(pd.DataFrame({"question_id": ["q1"], "fallback": [True]})) == 0


def test_the_rule_reads_polars_traces_as_pandas_ones() -> None:
    """A polars trace counts as the same trace in pandas: statuses, CEE's lists (null = none),
    a fallback flag (null = not) or CatRAG's fallback name ("" = none)."""
    traces = [
        {"status": ["ok", "failed", None], "filter_status": ["llm_timeout", "ok", "ok"]},
        {"stop_reason": ["rounds", "x", "rounds"], "llm_failures": [[], ["round2:summary:invalid_json"], None]},
        {"question_id": ["q1", "q2", "q3"], "fallback": [True, None, False]},
        {"question_id": ["q1", "q2", "q3"], "fallback": ["", "dense", ""]},
    ]
    usage = {"llm_usage": {"requests": 4, "failures": 1}}
    for columns in traces:
        as_pandas, as_polars = pd.DataFrame(columns), pl.DataFrame(columns)
        assert llm_failure_counts(usage, as_polars) == llm_failure_counts(usage, as_pandas)
    assert failed_questions(pl.DataFrame(traces[0])) == 2
    assert failed_questions(pl.DataFrame(traces[1])) == 1
    assert llm_failure_counts(usage, pl.DataFrame(traces[3]))["fallback_questions"] == 1


def test_llm_method_stage_fails_when_many_questions_fail_at_few_requests(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The partial-replay case: 1 failed request of 10 (10 %) but 1 of 2 questions (50 %)."""
    monkeypatch.chdir(tmp_path)
    out = _method_output(1, 10)
    out.trace["status"] = ["failed", "ok"]
    with pytest.raises(RuntimeError, match=r"^1 of 2 questions failed "
                                           r"\(50.0% > llm.max_failure_rate 20.0%\)"):
        write_method_outputs("toy", "m", "m", "retrieve-m", out, 0.2)
    assert DatasetPaths("toy").trace("m").exists()                           # written first
