"""``evichain.report.runs_export``: TREC runs, qrels and answers files, read back and byte-stable."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from evichain.paths import DatasetPaths
from evichain.report import runs_export as rx

RUN = pl.DataFrame({"question_id": ["q2", "q1", "q1", "q1", "q2"],
                    "passage_id": ["d5", "d3", "d0", "d1", "d4"],
                    "rank": [7, 30, 10, 20, 3],          # not 1..n: positions come from the order
                    "score": [0.1, 0.5, 0.5, 0.5, 0.9]})  # tied and unordered: not exported

QUESTIONS = pl.DataFrame({"question_id": ["q1", "q2", "q3", "q4"],
                          "answers": [["851", "20 March 851"], ["Tours"], [], ["Erstein"]],
                          "gold_passage_ids": [["d0", "d1", "d0"], ["d4"], ["d2"], []],
                          "gold_reliable": [True, False, True, True]})


def test_trec_run_round_trip_keeps_the_rank_order(tmp_path: Path) -> None:
    path = rx.write_trec_run(RUN, tmp_path / "m.trec.gz", "bm25")
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    assert lines == ["q1 Q0 d0 1 -1 bm25", "q1 Q0 d1 2 -2 bm25", "q1 Q0 d3 3 -3 bm25",
                     "q2 Q0 d4 1 -1 bm25", "q2 Q0 d5 2 -2 bm25"]
    back = rx.read_trec_run(path)
    assert back["passage_id"].to_list() == ["d0", "d1", "d3", "d4", "d5"]
    assert back["rank"].to_list() == [1, 2, 3, 1, 2]
    assert back["score"].to_list() == [-1.0, -2.0, -3.0, -1.0, -2.0]
    assert set(back["tag"]) == {"bm25"}


def test_files_are_byte_deterministic(tmp_path: Path) -> None:
    first = rx.write_trec_run(RUN, tmp_path / "a.trec.gz", "m").read_bytes()
    second = rx.write_trec_run(RUN.reverse(), tmp_path / "b.trec.gz", "m").read_bytes()
    assert first == second
    assert first[4:8] == b"\0\0\0\0" and first[9] == 255  # mtime 0, OS "unknown"
    answers = pl.DataFrame({"question_id": ["q2", "q1"], "prediction": ["Tours", "é 851"],
                            "status": ["ok", "ok"]})
    one = rx.write_answers(answers, tmp_path / "a.jsonl").read_bytes()
    assert one == rx.write_answers(answers.reverse(), tmp_path / "b.jsonl").read_bytes()
    gold = rx.write_gold_answers(QUESTIONS, "all", tmp_path / "g1.json").read_bytes()
    assert gold == rx.write_gold_answers(QUESTIONS.reverse(), "all", tmp_path / "g2.json").read_bytes()


def test_qrels_and_gold_hold_only_the_evaluated_questions(tmp_path: Path) -> None:
    reliable = rx.evaluated_questions(QUESTIONS, reliable_only=True)
    rx.write_qrels(reliable, tmp_path / "qrels.txt")
    assert (tmp_path / "qrels.txt").read_text() == "q1 0 d0 1\nq1 0 d1 1\nq3 0 d2 1\n"
    qrels = rx.read_qrels(tmp_path / "qrels.txt")
    assert qrels.rows() == [("q1", "d0", 1), ("q1", "d1", 1), ("q3", "d2", 1)]
    rx.write_gold_answers(reliable, rx.question_filter(True), tmp_path / "gold.json")
    assert rx.read_gold_answers(tmp_path / "gold.json") == (
        "gold_reliable", {"q1": ["851", "20 March 851"], "q4": ["Erstein"]})
    assert rx.evaluated_questions(QUESTIONS, reliable_only=False).height == 4


def test_answers_round_trip_with_optional_fields(tmp_path: Path) -> None:
    answers = pl.DataFrame({"question_id": ["q2", "q1"], "prediction": [None, "851"],
                            "status": ["failed", "ok"], "prompt_tokens": [10, 20],
                            "completion_tokens": [1, 2], "raw": ["x", "y"]})
    rows = rx.read_answers(rx.write_answers(answers, tmp_path / "a.jsonl"))
    assert rows == [{"question_id": "q1", "prediction": "851", "status": "ok",
                     "prompt_tokens": 20, "completion_tokens": 2},
                    {"question_id": "q2", "prediction": None, "status": "failed",
                     "prompt_tokens": 10, "completion_tokens": 1}]


@pytest.mark.parametrize(("run", "message"), [
    (pl.DataFrame({"question_id": ["q", "q"], "passage_id": ["d", "d"], "rank": [1, 2]}), "passage_id"),
    (pl.DataFrame({"question_id": ["q", "q"], "passage_id": ["d", "e"], "rank": [1, 1]}), "rank"),
    (pl.DataFrame({"question_id": ["q"], "passage_id": ["a b"], "rank": [1]}), "whitespace"),
])
def test_bad_runs_are_refused(run: pl.DataFrame, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rx.trec_run_text(run, "m")


def test_reader_refuses_a_shuffled_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.trec.gz"
    path.write_bytes(gzip.compress(b"q1 Q0 d0 1 -1 m\nq2 Q0 d1 1 -1 m\nq1 Q0 d2 2 -2 m\n"))
    with pytest.raises(ValueError, match="two separate blocks"):
        rx.read_trec_run(path)
    path.write_bytes(gzip.compress(b"q1 Q0 d0 2 -2 m\n"))
    with pytest.raises(ValueError, match="expected 1"):
        rx.read_trec_run(path)


def test_export_writes_reported_runs_and_lists_absent_ones(tmp_path: Path) -> None:
    paths = DatasetPaths("ds", tmp_path / "artifacts")
    paths.dir.mkdir(parents=True)
    QUESTIONS.write_parquet(paths.questions)
    paths.run("bm25").parent.mkdir()
    RUN.write_parquet(paths.run("bm25"))
    RUN.write_parquet(paths.run("unreported"))
    reports = tmp_path / "reports"
    (reports / "metrics" / "ds").mkdir(parents=True)
    metrics = {"bm25": {"n_questions": 2, "Recall@5": 0.5}, "gone": {"n_questions": 2, "Recall@5": 0.1},
               "empty": {"n_questions": 0}, "qa-bm25": {"n_questions": 2, "EM": 0.5, "F1": 0.5},
               "medqa-bm25": {"n_questions": 2, "ACC": 0.5}}
    for name, body in metrics.items():
        (reports / "metrics" / "ds" / f"{name}.json").write_text(json.dumps(body))
    assert rx.reported_methods(reports / "metrics" / "ds") == (["bm25", "gone"], ["bm25"])
    assert rx.export_runs(paths, reports, reliable_only=True) == {"exported": ["bm25"], "not_here": ["gone"]}
    assert sorted(p.name for p in (reports / "runs" / "ds").iterdir()) == ["bm25.trec.gz", "qrels.txt"]
    assert rx.export_answers(paths, reports, reliable_only=True) == {"exported": [], "not_here": ["bm25"]}
    assert sorted(p.name for p in (reports / "answers" / "ds").iterdir()) == ["gold.json"]
