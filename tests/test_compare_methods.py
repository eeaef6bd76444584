"""``scripts/compare_methods.py``: paired difference of two methods' per-question scores."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from scripts.compare_methods import contrast_rows, group_means, render


def _write(eval_dir: Path, method: str, ids: list[str], recall: list[float]) -> None:
    (eval_dir / "ds").mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"question_id": ids, "Recall@5": recall}).to_parquet(eval_dir / "ds" / f"{method}.parquet")


def test_difference_is_paired_on_shared_questions(tmp_path: Path) -> None:
    _write(tmp_path, "a", ["q1", "q2", "q3", "q4"], [1.0, 1.0, 0.5, 0.0])
    _write(tmp_path, "b", ["q4", "q3", "q2", "q9"], [0.0, 0.0, 0.5, 1.0])  # q1/q9 not shared
    rows = contrast_rows(tmp_path, "ds", "a", "b", ("Recall@5",))
    (row,) = rows.to_dict("records")
    assert row["n"] == 3
    assert row["a_mean"] == 50.0 and row["b_mean"] == 16.67  # points, two decimals (1.5/3, 0.5/3)
    assert row["difference"] == 33.33  # differences 0.5, 0.5, 0 (q2, q3, q4)
    assert 0.0 <= row["ci_low"] <= row["difference"] <= row["ci_high"] <= 50.0
    assert "| Recall@5 | 3 | 50.0 | 16.67 | +33.33 [" in render(rows, "a", "b")


def test_missing_metric_names_the_methods(tmp_path: Path) -> None:
    _write(tmp_path, "a", ["q1"], [1.0])
    _write(tmp_path, "b", ["q1"], [0.0])
    with pytest.raises(SystemExit, match="Chain@5"):
        contrast_rows(tmp_path, "ds", "a", "b", ("Chain@5",))


def test_group_means_split_the_shared_questions(tmp_path: Path) -> None:
    _write(tmp_path, "a", ["q1", "q2", "q3"], [1.0, 0.5, 0.0])
    _write(tmp_path, "b", ["q1", "q2", "q4"], [0.0, 0.5, 1.0])  # q3/q4 not shared
    questions = pd.DataFrame({"question_id": ["q1", "q2", "q3", "q4"], "type": ["x", "y", "x", "x"]})
    out = group_means(tmp_path, questions, "ds", "a", "b", ("Recall@5",), "type")
    assert out.to_dict("records") == [
        {"type": "x", "n": 1, "Recall@5 a": 100.0, "Recall@5 b": 0.0},
        {"type": "y", "n": 1, "Recall@5 a": 50.0, "Recall@5 b": 50.0}]
    with pytest.raises(SystemExit, match="no column 'n_hops'"):
        group_means(tmp_path, questions, "ds", "a", "b", ("Recall@5",), "n_hops")
