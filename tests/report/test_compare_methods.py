"""``evichain compare-methods`` (:mod:`evichain.report.compare`): paired difference of two
methods' per-question scores."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evichain.cli import app
from evichain.report.compare import contrast_rows, group_means, render, report


def _write(eval_dir: Path, method: str, ids: list[str], recall: list[float]) -> None:
    (eval_dir / "ds").mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"question_id": ids, "Recall@5": recall}).to_parquet(eval_dir / "ds" / f"{method}.parquet")


def test_difference_is_paired_on_shared_questions(tmp_path: Path) -> None:
    _write(tmp_path, "a", ["q1", "q2", "q3", "q4"], [1.0, 1.0, 0.5, 0.0])
    _write(tmp_path, "b", ["q4", "q3", "q2", "q9"], [0.0, 0.0, 0.5, 1.0])  # q1/q9 not shared
    rows = contrast_rows(tmp_path, "ds", "a", "b", ("Recall@5",))
    (row,) = rows.to_dicts()
    assert row["n"] == 3
    assert row["a_mean"] == 50.0 and row["b_mean"] == 16.67  # points, two decimals (1.5/3, 0.5/3)
    assert row["difference"] == 33.33  # differences 0.5, 0.5, 0 (q2, q3, q4)
    assert 0.0 <= row["ci_low"] <= row["difference"] <= row["ci_high"] <= 50.0
    assert "| Recall@5 | 3 | 50.0 | 16.67 | +33.33 [" in render(rows, "a", "b")


def test_missing_metric_names_the_methods(tmp_path: Path) -> None:
    _write(tmp_path, "a", ["q1"], [1.0])
    _write(tmp_path, "b", ["q1"], [0.0])
    with pytest.raises(ValueError, match="Chain@5"):
        contrast_rows(tmp_path, "ds", "a", "b", ("Chain@5",))


def test_group_means_split_the_shared_questions(tmp_path: Path) -> None:
    _write(tmp_path, "a", ["q1", "q2", "q3"], [1.0, 0.5, 0.0])
    _write(tmp_path, "b", ["q1", "q2", "q4"], [0.0, 0.5, 1.0])  # q3/q4 not shared
    questions = pd.DataFrame({"question_id": ["q1", "q2", "q3", "q4"], "type": ["x", "y", "x", "x"]})
    out = group_means(tmp_path, questions, "ds", "a", "b", ("Recall@5",), "type")
    assert out.to_dicts() == [
        {"type": "x", "n": 1, "Recall@5 a": 100.0, "Recall@5 b": 0.0},
        {"type": "y", "n": 1, "Recall@5 a": 50.0, "Recall@5 b": 50.0}]
    with pytest.raises(ValueError, match="no column 'n_hops'"):
        group_means(tmp_path, questions, "ds", "a", "b", ("Recall@5",), "n_hops")


def test_command_prints_the_contrast_and_the_group_means(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path / "eval", "a", ["q1", "q2", "q3"], [1.0, 0.5, 0.0])
    _write(tmp_path / "eval", "b", ["q1", "q2", "q3"], [0.0, 0.5, 1.0])
    questions = pd.DataFrame({"question_id": ["q1", "q2", "q3"], "type": ["x", "y", "x"]})
    (tmp_path / "artifacts" / "ds").mkdir(parents=True)
    questions.to_parquet(tmp_path / "artifacts" / "ds" / "questions.parquet")
    monkeypatch.chdir(tmp_path)
    args = ["compare-methods", "ds", "a", "b", "--eval-dir", "eval", "--metrics", "Recall@5"]
    result = CliRunner().invoke(app, [*args, "--by", "type"])
    assert result.exit_code == 0, result.output
    expected = report(Path("eval"), "ds", "a", "b", ("Recall@5",), questions=questions, by="type")
    assert result.output == expected + "\n"
    assert "| Recall@5 | 3 | 50.0 | 50.0 | " in result.output and "| type | n |" in result.output
    missing = CliRunner().invoke(app, [*args, "--metrics", "Chain@5,nDCG@10"])
    assert missing.exit_code == 2 and "Chain@5, nDCG@10 missing from a or b on ds" in missing.output
