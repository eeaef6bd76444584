"""The shared writer of the tuning stages (``stages/_tuning.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import polars as pl
import pytest

from evichain.config import load_params
from stages._tuning import (
    finish_tuning,
    require_tuning_dataset,
    tuning_csv,
    tuning_files,
    write_tuning,
)

ROOT = Path(__file__).resolve().parents[2]


def test_write_tuning_names_rounds_and_records(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    table = pd.DataFrame({"bridge_inherit": [0.0, 0.5], "objective": [1.23456789, 1.5]})
    csv_path, json_path = write_tuning("tune_x", "cee", table, {"bridge_inherit": 0.5},
                                       {"questions": 2})
    assert (csv_path, json_path) == tuning_files("tune_x", "cee")
    assert csv_path.as_posix() == "reports/tuning/tune_x-cee.csv"
    assert pd.read_csv(csv_path)["objective"].tolist() == [1.234568, 1.5]
    assert json.loads(json_path.read_text()) == {"dataset": "tune_x",
                                                 "chosen": {"bridge_inherit": 0.5},
                                                 "questions": 2}


def test_tuning_csv_is_the_pandas_format_for_either_table_type() -> None:
    """``tuning_csv`` writes what ``round(6).to_csv(index=False)`` wrote: round half to even
    at 6 places, shortest float repr, empty nulls, ``True`` / ``False``, minimal quoting; the
    committed grids re-write byte for byte."""
    table = pd.DataFrame({"variant": ["robust", "a,b"], "eps": [0.0000025, 1e-07],
                          "backfill": [True, False], "k_r": [2, 4], "pool": [float("nan"), 10.0],
                          "objective": [1.23456789, 1e16]})
    want = table.round(6).to_csv(index=False, lineterminator="\n")
    assert tuning_csv(table) == want
    assert tuning_csv(pl.from_pandas(table)) == want
    for path in sorted((ROOT / "reports" / "tuning").glob("*.csv")):
        assert tuning_csv(pd.read_csv(path)) == path.read_text()


def test_reported_samples_are_refused_and_tuning_samples_pass() -> None:
    params = load_params(ROOT / "params.yaml")
    for ds in params.tuning_datasets:
        require_tuning_dataset(params, ds)
    with pytest.raises(ValueError, match="tuning_datasets"):
        require_tuning_dataset(params, "2wiki_s")


def _summary(failures: int, requests: int) -> dict[str, object]:
    return {"configurations": 2, "questions": 2,
            "llm_usage": {"calls": 3, "failures": failures, "requests": requests}}


def test_finish_tuning_writes_then_fails_above_the_failure_rate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    params = load_params(ROOT / "params.yaml")
    table = pd.DataFrame({"k_r": [2, 4], "objective": [1.0, 1.5]})
    limit = params.llm.max_failure_rate
    ok_failures = int(limit * 100)  # at the limit: passes
    line = finish_tuning("tune_x", "evireform", params, table, {"k_r": 4},
                         _summary(ok_failures, 100))
    assert line == {"dataset": "tune_x", "chosen": {"k_r": 4}, "configurations": 2,
                    "llm_calls": 3}
    _, json_path = tuning_files("tune_x", "evireform")
    json_path.unlink()
    with pytest.raises(RuntimeError, match="llm.max_failure_rate"):
        finish_tuning("tune_x", "evireform", params, table, {"k_r": 4},
                      _summary(ok_failures + 1, 100))
    assert json.loads(json_path.read_text())["llm_usage"]["failures"] == ok_failures + 1
