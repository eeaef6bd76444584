"""The GraphRAG-Bench Medical report section from fixture metrics JSON."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import polars as pl

from evichain.io import write_json
from evichain.qa.medical_eval import summarize
from evichain.qa.medical_metrics import QUESTION_TYPES
from evichain.report.main_report import read_metric_files
from evichain.report.medical import medical_metrics, medical_section, medical_table


def _per_q(correctness: float) -> pd.DataFrame:
    nan = math.nan
    rows = []
    for i, qtype in enumerate(QUESTION_TYPES):
        rows.append({"question_id": f"q{i}", "type": qtype, "status": "ok", "idk": False,
                     "correctness": correctness, "rouge_l": 0.5 if i < 2 else nan,
                     "coverage": 0.25 if i >= 2 else nan, "faithfulness": 1.0 if i == 3 else nan,
                     "parse_repairs": 1, "judge_prompt_tokens": 100, "judge_completion_tokens": 10,
                     "reader_prompt_tokens": 50, "reader_completion_tokens": 5})
    rows.append({**rows[0], "question_id": "q9", "status": "answer_failed", "correctness": 0.0,
                 "rouge_l": 0.0, "parse_repairs": 0, "judge_prompt_tokens": 0,
                 "judge_completion_tokens": 0})
    return pd.DataFrame(rows)


def _write(root: Path, dataset: str, method: str, correctness: float) -> dict:
    summary = summarize(_per_q(correctness), dataset=dataset, method=method, judge_model="openai/judge-x",
                        reader_model="local/reader", similarity_model="minilm", weights=(0.75, 0.25))
    write_json(summary, root / dataset / f"medqa-{method}.json")
    return summary


def test_summarize_shapes_the_metrics_json() -> None:
    s = summarize(_per_q(0.8), dataset="medical_s", method="bm25", judge_model="j", reader_model="r",
                  similarity_model="e", weights=(0.75, 0.25))
    assert s["questions"] == 5 and s["answer_failed"] == 1 and s["parse_repairs"] == 4
    assert s["per_type"]["Fact Retrieval"]["n"] == 2
    assert s["per_type"]["Fact Retrieval"]["correctness"] == 0.4  # (0.8 + 0) / 2
    assert s["ACC"] == round((0.4 + 0.8 * 3) / 4, 6)
    assert s["judge_tokens"] == {"prompt": 400, "completion": 40}
    assert s["judge_tokens_per_question"] == 88.0 and s["reader_tokens_per_question"] == 55.0


def test_medical_section_renders_one_table_per_dataset(tmp_path: Path) -> None:
    _write(tmp_path, "medical_s", "bm25", 0.8)
    _write(tmp_path, "medical_s", "dense", 0.6)
    write_json({"Recall@5": 0.1}, tmp_path / "medical_s" / "bm25.json")  # retrieval metrics: ignored
    text = medical_section(medical_metrics(read_metric_files(tmp_path, ["medical_s"])))
    assert text.startswith("## GraphRAG-Bench Medical")
    assert "### medical_s" in text and "Reader `local/reader`" in text
    header = next(line for line in text.splitlines() if line.startswith("| Method"))
    assert header == ("| Method | FR Corr | FR ROUGE-L | CR Corr | CR ROUGE-L | CS Corr | CS Cov | "
                      "CG Corr | CG Cov | CG Faith | ACC | n (FR/CR/CS/CG) | judge |")
    bm25 = next(line for line in text.splitlines() if line.startswith("| bm25"))
    assert "**40.00**" in bm25 and "**70.00**" in bm25  # FR Corr and ACC, best of the two
    assert "2/1/1/1" in bm25 and "`openai/judge-x`" in bm25
    dense = next(line for line in text.splitlines() if line.startswith("| dense"))
    assert "<u>30.00</u>" in dense and "<u>52.50</u>" in dense
    assert "1 failed answers (scored 0)" in text


def test_medical_section_is_empty_without_metrics(tmp_path: Path) -> None:
    assert medical_section(medical_metrics(read_metric_files(tmp_path / "nothing", ["demo"]))) == ""
    write_json({"Recall@5": 0.3}, tmp_path / "demo" / "bm25.json")
    assert medical_metrics(read_metric_files(tmp_path, ["demo"])) == {}
    assert medical_section({}) == ""


def test_medical_view_keeps_only_the_listed_datasets(tmp_path: Path) -> None:
    written = _write(tmp_path, "medical_s", "bm25", 0.8)
    _write(tmp_path, "medical", "bm25", 0.5)  # on disk, but not a dataset of this report
    view = medical_metrics(read_metric_files(tmp_path, ["medical_s", "demo"]))
    assert list(view) == ["medical_s"] and list(view["medical_s"]) == ["bm25"]
    assert view["medical_s"]["bm25"]["ACC"] == written["ACC"]


def test_missing_values_render_as_not_evaluated() -> None:
    table = medical_table({"bm25": {"per_type": {"Fact Retrieval": {"n": 3, "correctness": 0.5}},
                                    "ACC": None, "judge_model": "j"}})
    row = table.row(by_predicate=pl.col("method") == "bm25", named=True)
    assert row["FR Corr"] == 0.5 and row["CR Corr"] == "N/E" and row["ACC"] == "N/E"
    assert row["n (FR/CR/CS/CG)"] == "3/0/0/0"
