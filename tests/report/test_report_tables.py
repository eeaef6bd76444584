"""Markdown/CSV table rendering and deterministic figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest

from evichain.metrics.bootstrap import bootstrap_table
from evichain.report.differences import difference_frame
from evichain.report.figures import paired_difference_figure, recall_at_k_figure
from evichain.report.tables import (
    definitions_markdown,
    labelled_frame,
    render_bootstrap_markdown,
    render_csv,
    render_markdown,
    render_plain_markdown,
)


@pytest.fixture
def metrics() -> pl.DataFrame:
    return pl.DataFrame(
        [
            pl.Series("method", ["GeAR", "EviReform", "NV-Embed-v2", "IRCoT"]),
            pl.Series("Recall@5", [0.9275, 0.9775, 0.94049, "N/A"], dtype=pl.Object),
            pl.Series("F1", [0.5414, 0.5805, 0.5805, 0.50]),  # tie for best
            pl.Series("Tokens", [120.0, 300.0, 90.0, "N/E"], dtype=pl.Object),
        ]
    )


def test_markdown_marks_and_passthrough(metrics: pl.DataFrame) -> None:
    md = render_markdown(metrics, percent=True, lower_is_better=["Tokens"])
    lines = md.splitlines()
    assert lines[0] == "| Method | Recall@5 | F1 | Tokens |"
    assert lines[1] == "| --- | ---: | ---: | ---: |"
    assert lines[2] == "| GeAR | 92.75 | <u>54.14</u> | <u>12000.00</u> |"
    assert lines[3] == "| EviReform | **97.75** | **58.05** | 30000.00 |"
    assert lines[4] == "| NV-Embed-v2 | <u>94.05</u> | **58.05** | **9000.00** |"
    assert lines[5] == "| IRCoT | N/A | 50.00 | N/E |"
    assert md.endswith("\n")


def test_marks_follow_displayed_rounding() -> None:
    df = pl.DataFrame({"label": ["a", "b", "c", "d"], "EM": [0.123449, 0.123451, 0.1, -0.00001]})
    shown = [line.split("|")[2].strip() for line in render_markdown(df).splitlines()[2:]]
    assert shown == ["<u>12.34</u>", "**12.35**", "10.00", "0.00"]
    one_decimal = render_markdown(df, decimals=1).splitlines()[2:4]
    assert one_decimal == ["| a | **12.3** |", "| b | **12.3** |"]  # tie after rounding


def test_csv_has_values_without_markup(metrics: pl.DataFrame) -> None:
    csv = render_csv(metrics.select("method", "Recall@5", "F1"))
    assert csv.splitlines() == [
        "method,Recall@5,F1",
        "GeAR,92.75,54.14",
        "EviReform,97.75,58.05",
        "NV-Embed-v2,94.05,58.05",
        "IRCoT,N/A,50.00",
    ]


def test_labelled_frame_keeps_mixed_cells_as_they_are() -> None:
    table = labelled_frame({"a": {"x": 0.5, "y": "N/E", "mixed": 0.25},
                            "b": {"x": 1, "mixed": "N/A", "z": 3}})  # x: an integer beside a float
    assert table.columns == ["method", "x", "y", "mixed", "z"]
    assert table["method"].to_list() == ["a", "b"]
    assert (table.schema["x"], table.schema["y"], table.schema["mixed"]) == (pl.Float64, pl.String, pl.Object)
    assert table["mixed"].to_list() == [0.25, "N/A"] and table["y"].to_list() == ["N/E", None]
    assert labelled_frame({"a": {"x": 0.5}}, label="variant", columns=["y", "x"]).columns == ["variant", "y", "x"]


def test_definitions_listed_beside_table() -> None:
    text = definitions_markdown(["Recall@5", "MAP@10", "Unknown"])
    assert "**Recall@5**: mean over questions of |G ∩ R_K| / |G|" in text
    assert "denominator |G|" in text and "Unknown" not in text


def _boot() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    frames = []
    for ds in ["2wiki", "musique"]:
        qids = [f"q{i}" for i in range(60)]
        per_q = {
            m: pd.DataFrame({"question_id": qids, "Recall@5": rng.random(60), "F1": rng.random(60)})
            for m in ["EviReform", "GeAR", "BM25"]
        }
        frames.append(bootstrap_table(per_q, ["Recall@5", "F1"], ds, "EviReform", n_resamples=300))
    return pl.concat(frames)


def _diffs() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    qids = [f"q{i}" for i in range(60)]
    frames = []
    for ds in ["2wiki", "musique"]:
        per_q = {m: pl.DataFrame({"question_id": qids, "Recall@5": rng.random(60),
                                  "Chain@5": rng.random(60)})
                 for m in ["evireform-full", "gear", "bm25", "proprag"]}
        frames.append(difference_frame(per_q, ds, "proprag", n_resamples=300))
    return pl.concat(frames)


def test_bootstrap_markdown_layout() -> None:
    boot = _boot()
    lines = render_bootstrap_markdown(boot).splitlines()
    assert lines[0] == "| Dataset | Method or statistic | Recall@5 | F1 |"
    assert len(lines) == 2 + 3 * 2
    assert lines[2].startswith("| 2wiki | EviReform [95% CI] | ")
    diff = boot.filter((pl.col("kind") == "difference") & (pl.col("dataset") == "2wiki")).row(0, named=True)
    assert f"| {diff['comparator']} {100 * diff['comparator_mean']:.2f} |" in lines[3]
    assert lines[4].startswith("|  | Difference [95% CI] | ")
    assert f"{100 * diff['mean']:+.2f} [{100 * diff['ci_low']:+.2f}, " in lines[4]


def test_figures_are_byte_deterministic(tmp_path: Path) -> None:
    recall = labelled_frame(
        {"BM25": {"Recall@1": 0.3, "Recall@2": 0.5, "Recall@5": 0.7},
         "EviReform": {"Recall@1": 0.4, "Recall@2": 0.6, "Recall@5": 0.9},
         "IRCoT": {"Recall@1": "N/A", "Recall@2": "N/A", "Recall@5": None}}
    )
    diffs = _diffs()
    for name in ["a", "b"]:
        recall_at_k_figure(recall, tmp_path / name / "recall.png", dataset="musique",
                           n_questions={"BM25": 40, "EviReform": 40, "IRCoT": 40})
        paired_difference_figure(diffs, tmp_path / name / "diff.png")
    for fig in ["recall.png", "diff.png"]:
        first, second = (tmp_path / "a" / fig).read_bytes(), (tmp_path / "b" / fig).read_bytes()
        assert first[:8] == b"\x89PNG\r\n\x1a\n"
        assert b"Software" not in first
        assert first == second


def test_plain_markdown_aligns_numbers_right_and_text_left() -> None:
    df = pl.DataFrame({"label": ["a", "b"], "pool": ["C0", "C+"], "n": np.array([100, 100], dtype=np.int64),
                       "cov": [69.75, None], "on": [True, False]})
    lines = render_plain_markdown(df, index_name="method").splitlines()
    assert lines[0] == "| method | pool | n | cov | on |"
    assert lines[1] == "| --- | --- | ---: | ---: | --- |"
    assert lines[3] == "| b | C+ | 100 |  | False |"
