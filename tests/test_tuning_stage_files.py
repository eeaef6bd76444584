"""The shared writer of the tuning stages (``stages/_tuning.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from evichain.config import load_params
from stages._tuning import require_tuning_dataset, tuning_files, write_tuning

ROOT = Path(__file__).resolve().parents[1]


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


def test_reported_samples_are_refused_and_tuning_samples_pass() -> None:
    params = load_params(ROOT / "params.yaml")
    for ds in params.tuning_datasets:
        require_tuning_dataset(params, ds)
    with pytest.raises(ValueError, match="tuning_datasets"):
        require_tuning_dataset(params, "2wiki_s")
