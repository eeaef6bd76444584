"""Bad input (reliability drill 4): every case stops its real stage with ONE clear error line
(exit 2) naming the file / key / question and what to do; Prefect's own failure records (and
their tracebacks) are not repeated for such input errors; an unreachable LLM endpoint gives
failure rows fast, not a hang. Cases: ``scripts/drills/bad_input.py`` (which also runs them as
subprocesses for the report)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from scripts.drills import bad_input
from scripts.drills.common import run_inprocess

PREPARE_CASES = [name for name, case in bad_input.CASES.items()
                 if case.stage == "prepare" or name == "missing upstream artifact"]


@pytest.fixture()
def prefect_records() -> Iterator[list[logging.LogRecord]]:
    """Records that pass the loggers of Prefect's task and flow runs (the console sees them)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(level=logging.INFO)
    loggers = [logging.getLogger(n) for n in ("prefect.task_runs", "prefect.flow_runs")]
    for lg in loggers:
        lg.addHandler(handler)
    yield records
    for lg in loggers:
        lg.removeHandler(handler)


def _one_error(result, stage: str) -> str:  # type: ignore[no-untyped-def]
    assert result.exit_code == 2, result.output
    lines = bad_input.error_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"[{stage}@2wiki") and "] error: " in lines[0]
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize("name", PREPARE_CASES)
def test_bad_input_stops_the_stage_with_one_clear_error(
        name: str, tmp_path: Path, prefect_records: list[logging.LogRecord]) -> None:
    case = bad_input.CASES[name]
    case.build(tmp_path)
    result = run_inprocess(case.stage, case.args, tmp_path, case.env)
    line = _one_error(result, case.stage)
    missing = [e for e in case.expect if e not in line]
    assert not missing, f"{line!r} lacks {missing}"
    noisy = [r.getMessage()[:120] for r in prefect_records
             if r.levelno >= logging.ERROR or r.exc_info or "Failed(" in r.getMessage()]
    assert noisy == [], noisy                                   # no traceback, no repeats
    assert not (tmp_path / "artifacts" / "2wiki" / "corpus.parquet").exists()


@pytest.mark.parametrize("name", ["missing model path (embed.model)", "model path without a model"])
def test_bad_embedding_model_is_one_clear_error(name: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The embedder as the dense stage builds it, inside ``run_stage`` (the stage itself also
    works, but its encode task retries twice, 5 s apart: see the report)."""
    from evichain.config import load_params
    from evichain.embed.encoder import Embedder
    from stages._common import run_stage

    case = bad_input.CASES[name]
    case.build(tmp_path)
    params = load_params(tmp_path / "params.yaml")
    with pytest.raises(SystemExit) as exit_info:
        run_stage("retrieve@2wiki-dense", lambda: Embedder(params.embed).encode(["x"]))
    assert exit_info.value.code == 2
    lines = bad_input.error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and all(e in lines[0] for e in case.expect), lines


@pytest.mark.timeout(120)
def test_unreachable_llm_endpoint_gives_failure_rows_not_a_hang(tmp_path: Path) -> None:
    case = bad_input.CASES["unreachable LLM endpoint"]
    case.build(tmp_path)
    start = time.perf_counter()
    result = run_inprocess(case.stage, case.args, tmp_path, case.env)
    assert time.perf_counter() - start < 60
    line = _one_error(result, "read")
    assert all(e in line for e in case.expect), line
    qa = pd.read_parquet(tmp_path / "artifacts/2wiki/qa/bm25.parquet")
    assert (qa["status"] == "failed").all() and qa["prediction"].isna().all()
    assert set(qa["error_kind"]) <= {"connection", "server_error"}
    assert qa["error"].str.contains("Connection|connect", case=False).all(), qa["error"].tolist()


def test_filter_keeps_tracebacks_of_other_errors(prefect_records: list[logging.LogRecord]) -> None:
    """Only input errors are quieted: a programming error keeps Prefect's traceback record."""
    from prefect import flow

    from stages._common import run_stage

    @flow(name="drill-bug")
    def buggy() -> None:
        raise ValueError("a bug, not an input error")

    with pytest.raises(SystemExit):
        run_stage("bug", buggy)
    assert any(r.exc_info for r in prefect_records)
