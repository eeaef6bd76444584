"""``stages.export_runs`` on a tiny demo (the Lothair passages): the reported run and answers are
exported with the metrics' question filter, and the cross-check recomputes their JSON exactly."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import polars as pl
import pytest

from evichain.metrics.qa import qa_frame
from evichain.metrics.retrieval import aggregate, per_question_frame
from scripts import crosscheck_metrics
from stages import export_runs
from tests.fixtures.lothair import SIX_PASSAGES

IDS = [pid for pid, _, _ in SIX_PASSAGES]  # d0 Lothair II, d1 Ermengarde of Tours, ...
QUESTIONS = pl.DataFrame({
    "question_id": ["q1", "q2", "q3"],
    "question": ["When did Lothair II's mother die?", "Where is Erstein?", "Who was Teutberga?"],
    "answers": [["20 March 851"], ["Bas-Rhin"], ["queen of Lotharingia"]],
    "gold_passage_ids": [IDS[:2], IDS[3:4], IDS[2:3]],
    "gold_reliable": [True, True, False],  # demo is a 2Wiki slice: q3 is not evaluated
})
RUN = pl.DataFrame({"question_id": ["q1"] * 3 + ["q2"] * 2 + ["q3"],
                    "passage_id": [IDS[1], IDS[4], IDS[0], IDS[5], IDS[3], IDS[2]],
                    "rank": [1, 2, 3, 1, 2, 1], "score": [3.0, 2.0, 1.0, 2.0, 1.0, 5.0]})
ANSWERS = pl.DataFrame({"question_id": ["q1", "q2", "q3"], "prediction": ["851", "Bas-Rhin", "a queen"],
                        "status": ["ok", "ok", "ok"], "prompt_tokens": [50, 40, 30],
                        "completion_tokens": [2, 3, 2]})


def _metrics(table: pl.DataFrame, excluded: dict[str, list[str]], tokens: float | None = None) -> str:
    """The metrics JSON of the reliable questions, as stages/evaluate.py writes it."""
    reliable = table.filter(pl.col("question_id").is_in(["q1", "q2"]))
    body = {k: (int(v) if k.startswith("n_") else round(float(v), 6))
            for k, v in aggregate(reliable, excluded).items()}
    if tokens is not None:
        body["reader_tokens_per_question"] = tokens
    return json.dumps({**body, "dataset": "demo", "question_filter": "gold_reliable"})


@pytest.fixture()
def demo(tmp_path: Path) -> Path:
    art = tmp_path / "artifacts" / "demo"
    (art / "runs").mkdir(parents=True)
    (art / "qa").mkdir()
    QUESTIONS.write_parquet(art / "questions.parquet")
    RUN.write_parquet(art / "runs" / "bm25.parquet")
    ANSWERS.write_parquet(art / "qa" / "bm25.parquet")
    metrics = tmp_path / "reports" / "metrics" / "demo"
    metrics.mkdir(parents=True)
    table, excluded = per_question_frame(RUN, QUESTIONS)
    (metrics / "bm25.json").write_text(_metrics(table, {"excluded_empty_gold": excluded}))
    (metrics / "dense.json").write_text(_metrics(table, {}))  # its run is not on this machine
    qa, excluded = qa_frame(ANSWERS, QUESTIONS)
    (metrics / "qa-bm25.json").write_text(_metrics(qa, {"excluded_no_answer": excluded}, 42.33))
    (tmp_path / "params.yaml").write_text("datasets: [demo]\n")
    return tmp_path


def _in(folder: Path, what: str, capsys: pytest.CaptureFixture[str]) -> str:
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        export_runs.main(dataset="demo", what=what, params_file=Path("params.yaml"))
    finally:
        os.chdir(cwd)
    return capsys.readouterr().out


def test_stage_exports_reported_files_with_the_reliable_filter(demo: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = _in(demo, "all", capsys)
    summary = json.loads(out.split("done: ", 1)[1])
    assert summary["runs"] == {"exported": ["bm25"], "not_here": ["dense"]}
    assert summary["answers"] == {"exported": ["bm25"], "not_here": []}
    runs, answers = demo / "reports/runs/demo", demo / "reports/answers/demo"
    assert (runs / "qrels.txt").read_text() == "q1 0 d0 1\nq1 0 d1 1\nq2 0 d3 1\n"
    assert gzip.decompress((runs / "bm25.trec.gz").read_bytes()).decode().splitlines()[:2] == [
        "q1 Q0 d1 1 -1 bm25", "q1 Q0 d4 2 -2 bm25"]
    assert json.loads((answers / "gold.json").read_text()) == {
        "question_filter": "gold_reliable", "answers": {"q1": ["20 March 851"], "q2": ["Bas-Rhin"]}}
    assert len((answers / "bm25.jsonl").read_text().splitlines()) == 3  # every answer the reader gave
    before = {p.name: p.read_bytes() for p in [*runs.iterdir(), *answers.iterdir()]}
    _in(demo, "all", capsys)
    assert before == {p.name: p.read_bytes() for p in [*runs.iterdir(), *answers.iterdir()]}

    checks = {c.name: c for c in crosscheck_metrics.check_all(demo / "reports")}
    assert checks["bm25"].status == "ok" and checks["qa-bm25"].status == "ok"
    assert checks["dense"].status == crosscheck_metrics.NOT_HERE


def test_stage_exports_one_kind_only(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _in(demo, "runs", capsys)
    assert "[export_runs@demo] done" in out and "answers" not in out.split("done: ", 1)[1]
    assert not (demo / "reports/answers").exists()
    with pytest.raises(SystemExit):
        _in(demo, "everything", capsys)
