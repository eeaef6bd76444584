"""``stages.evaluate`` end to end on a toy 2Wiki slice: per-question tables (sorted, with
``gold_reliable``, Arrow types as committed) and the metrics JSON (gold-reliable means, the
excluded questions counted)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evichain.io import read_json, write_parquet
from evichain.paths import DatasetPaths, ReportPaths

QUESTIONS = pl.DataFrame({
    "question_id": ["q3", "q1", "q2", "q4"],
    "question": ["c?", "a?", "b?", "d?"],
    "answers": [["Rome"], ["Paris"], [], ["Oslo"]],
    "gold_passage_ids": [["p3"], ["p1", "p2"], ["p9"], []],
    "gold_reliable": [True, True, False, True],
})
RUN = pl.DataFrame({"question_id": ["q1", "q1", "q2", "q3", "q3"], "passage_id": ["p1", "p5", "p9", "p4", "p3"],
                    "rank": [1, 2, 1, 1, 2], "score": [1.0, 0.5, 1.0, 1.0, 0.5]})
ANSWERS = pl.DataFrame({"question_id": ["q1", "q3"], "prediction": ["Paris", None],
                        "status": ["ok", "failed"], "prompt_tokens": [10, 20], "completion_tokens": [1, 3]})


@pytest.fixture()
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("orchestration: {max_workers: 1}\n")
    paths = DatasetPaths("2wiki")
    write_parquet(QUESTIONS, paths.questions)
    write_parquet(RUN, paths.run("bm25"))
    write_parquet(ANSWERS, paths.qa("bm25"))
    return tmp_path


def test_evaluate_stage_writes_sorted_tables_and_reliable_means(workdir: Path) -> None:
    from stages import evaluate

    evaluate.main(dataset="2wiki", method="bm25", kind="retrieval", params_file=Path("params.yaml"))
    evaluate.main(dataset="2wiki", method="bm25", kind="qa", params_file=Path("params.yaml"))
    paths, reports = DatasetPaths("2wiki"), ReportPaths()

    table = pq.read_table(paths.per_question("bm25"))
    assert table.schema.field("question_id").type == pa.large_string()
    assert table["question_id"].to_pylist() == ["q1", "q2", "q3"]  # q4: no gold passage
    assert table["gold_reliable"].to_pylist() == [True, False, True]
    assert table["Recall@1"].to_pylist() == [0.5, 1.0, 0.0] and table["Chain@2"].to_pylist() == [0.0, 1.0, 1.0]
    metrics = read_json(reports.metrics("2wiki", "bm25"))
    assert metrics["question_filter"] == "gold_reliable" and metrics["n_questions"] == 2
    assert metrics["n_excluded_empty_gold"] == 1 and metrics["Recall@2"] == 0.75

    qa = pq.read_table(paths.per_question("qa-bm25"))
    assert qa.schema.field("question_id").type == qa.schema.field("status").type == pa.string()
    assert qa["question_id"].to_pylist() == ["q1", "q3", "q4"]  # q2: no gold answer
    assert qa["status"].to_pylist() == ["ok", "failed", "missing"]
    qa_metrics = read_json(reports.metrics("2wiki", "qa-bm25"))
    assert qa_metrics["n_questions"] == 3 and qa_metrics["n_failed"] == 2
    assert qa_metrics["n_excluded_no_answer"] == 1 and qa_metrics["EM"] == round(1 / 3, 6)
    assert qa_metrics["reader_tokens_per_question"] == 17.0  # (11 + 23) / 2


def test_summarize_on_no_evaluated_question_says_so() -> None:
    from stages.evaluate import summarize

    per_q = pl.DataFrame({"question_id": ["q1"], "Recall@5": [1.0], "gold_reliable": [False]})
    out = summarize(per_q, {"excluded_empty_gold": []}, "2wiki", "bm25", reliable_only=True)
    assert out["n_questions"] == 0 and "note" in out
    assert summarize(per_q, {}, "musique", "bm25", reliable_only=False)["Recall@5"] == 1.0
