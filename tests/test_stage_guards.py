"""Stage guards: a stage fails above its failure-rate param, after writing its tables."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from evichain.paths import DatasetPaths
from stages._common import check_failure_rate, write_method_outputs


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
