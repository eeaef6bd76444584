"""``scripts/crosscheck_metrics.py``: the pipeline's metrics JSON recomputed from committed runs,
answers and gold agree; a planted mismatch, in a JSON or in the report's table, is found."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from evichain.metrics.qa import qa_frame
from evichain.metrics.retrieval import aggregate, per_question_frame
from evichain.report import runs_export as rx
from scripts import crosscheck_metrics as cc

QUESTIONS = pl.DataFrame({
    "question_id": ["q1", "q2", "q3", "q4"],
    "answers": [["20 March 851", "851"], ["Tours"], ["yes"], ["Erstein"]],
    "gold_passage_ids": [["d0", "d1"], ["d4"], ["d2", "d3", "d5"], ["d1"]],
})
RUNS = {  # q4 is absent from "dense": it scores 0
    "bm25": {"q1": ["d3", "d0", "d9", "d1"], "q2": ["d4"], "q3": ["d5", "d8", "d2", "d3"],
             "q4": ["d7", "d1"]},
    "dense": {"q1": ["d1", "d0"], "q2": ["d8", "d7", "d4"], "q3": ["d2"]},
}
ANSWERS = pl.DataFrame({"question_id": ["q1", "q2", "q3"], "prediction": ["the 851.", "Tours France", "no"],
                        "status": ["ok", "ok", "ok"], "prompt_tokens": [100, 120, 90],
                        "completion_tokens": [3, 4, 1]})


def _run_frame(ranked: dict[str, list[str]]) -> pl.DataFrame:
    rows = [(q, p, r) for q, ps in ranked.items() for r, p in enumerate(ps, start=1)]
    return pl.DataFrame(rows, schema=["question_id", "passage_id", "rank"], orient="row")


def _json(means: dict[str, float], extra: dict[str, object]) -> str:
    """A metrics JSON as stages/evaluate.py writes it (means rounded to 6 decimals)."""
    body = {k: (int(v) if k.startswith("n_") else round(float(v), 6)) for k, v in means.items()}
    return json.dumps({**body, **extra}, indent=2, sort_keys=True)


def _reports(root: Path) -> Path:
    """A reports tree: metrics JSON by the pipeline's own code, the exported files, a README."""
    reports = root / "reports"
    (reports / "metrics" / "ds").mkdir(parents=True)
    extra = {"dataset": "ds", "question_filter": "all"}
    for method, ranked in RUNS.items():
        run = _run_frame(ranked)
        table, excluded = per_question_frame(run, QUESTIONS)
        means = aggregate(table, {"excluded_empty_gold": excluded})
        (reports / "metrics" / "ds" / f"{method}.json").write_text(_json(means, extra))
        rx.write_trec_run(run, rx.run_file(reports, "ds", method), method)
    qa, excluded = qa_frame(ANSWERS, QUESTIONS)
    means = {**aggregate(qa, {"excluded_no_answer": excluded}), "reader_tokens_per_question": 106.0}
    (reports / "metrics" / "ds" / "qa-bm25.json").write_text(_json(means, extra))
    (reports / "metrics" / "ds" / "notrun.json").write_text(json.dumps({"n_questions": 4, "Recall@5": 0.25}))
    rx.write_qrels(QUESTIONS, rx.qrels_file(reports, "ds"))
    rx.write_gold_answers(QUESTIONS, "all", rx.gold_answers_file(reports, "ds"))
    rx.write_answers(ANSWERS, rx.answers_file(reports, "ds", "bm25"))
    bm25 = json.loads((reports / "metrics/ds/bm25.json").read_text())
    dense = json.loads((reports / "metrics/ds/dense.json").read_text())
    qa = json.loads((reports / "metrics/ds/qa-bm25.json").read_text())

    def pct(v: float) -> str:
        return f"{100 * v:.2f}"

    (reports / "README.md").write_text(
        "# Report\n\n## Main table (shape)\n\nSetup.\n\n### ds (4 questions)\n\n"
        "| Method | Recall@5 | Recall@10 | F1 | EM |\n| --- | ---: | ---: | ---: | ---: |\n"
        f"| bm25 | **{pct(bm25['Recall@5'])}** | {pct(bm25['Recall@10'])} | "
        f"{pct(qa['F1'])} | {pct(qa['EM'])} |\n"
        f"| dense | <u>{pct(dense['Recall@5'])}</u> | {pct(dense['Recall@10'])} | N/E | N/E |\n"
        "| notrun | 25.00 | N/A | N/E | N/E |\n\n"
        "## Retrieval decomposition at K = 5\n\n### ds (4 questions)\n\n"
        "| Method | Hit@5 | Recall@5 | Chain@5 |\n| --- | ---: | ---: | ---: |\n"
        f"| dense | {pct(dense['Hit@5'])} | {pct(dense['Recall@5'])} | {pct(dense['Chain@5'])} |\n\n"
        "## LLM tokens per question\n\n### ds (4 questions)\n\n| Method | retrieval | reader |\n"
        "| --- | ---: | ---: |\n| bm25 | 0.0 | 106.0 |\n")
    return reports


def test_pipeline_metrics_recomputed_with_no_mismatch(tmp_path: Path) -> None:
    reports = _reports(tmp_path)
    checks = {c.name: c for c in cc.check_all(reports)}
    assert set(checks) == {"bm25", "dense", "qa-bm25", "notrun"}
    for name in ("bm25", "dense", "qa-bm25"):
        assert checks[name].status == "ok" and checks[name].problems == [], checks[name]
        assert checks[name].diff_ir is not None and checks[name].diff_ir <= cc.TOLERANCE
        assert checks[name].diff_plain is not None and checks[name].diff_plain <= cc.TOLERANCE
    assert checks["notrun"].status == cc.NOT_HERE
    assert checks["dense"].values["Chain@20"] == pytest.approx(0.5)  # q1, q2; q4 (absent) scores 0
    assert checks["qa-bm25"].values["EM"] == pytest.approx(0.25)        # "the 851." = "851"
    cells, from_runs, bad = cc.check_report(reports / "README.md", reports / "metrics",
                                            list(checks.values()))
    assert (cells, from_runs, bad) == (10, 9, [])


def test_planted_json_mismatch_is_found_and_fails(tmp_path: Path) -> None:
    reports = _reports(tmp_path)
    path = reports / "metrics/ds/dense.json"
    stored = json.loads(path.read_text())
    stored["MAP@10"] = round(stored["MAP@10"] + 1e-5, 6)
    path.write_text(json.dumps(stored))
    out = tmp_path / "results.md"
    result = CliRunner().invoke(cc.app, ["--out", str(out), "--reports", str(reports)])
    assert result.exit_code == 1
    text = out.read_text()
    assert "| ds | dense | 4 |" in text and "| MISMATCH |" in text
    assert "with a mismatch: 1;" in text
    assert "- ds/dense: MAP@10 (ir_measures/library)" in text and "- ds/dense: MAP@10 (plain)" in text
    assert f"- {cc.NOT_HERE}, ds (1): notrun" in text


def test_planted_table_mismatch_is_found(tmp_path: Path) -> None:
    reports = _reports(tmp_path)
    readme = reports / "README.md"
    lines = readme.read_text().splitlines()
    decomposition = [i for i, line in enumerate(lines) if line.startswith("| dense | ")][-1]
    cells = cc.table_cells(lines[decomposition])
    lines[decomposition] = f"| dense | {cells[1]} | {cells[2]} | {float(cells[3]) + 0.01:.2f} |"
    readme.write_text("\n".join(lines) + "\n")
    out = tmp_path / "results.md"
    result = CliRunner().invoke(cc.app, ["--out", str(out), "--reports", str(reports)])
    assert result.exit_code == 1
    assert "10 percentage cells checked, 9 against values recomputed" in out.read_text()
    assert "1 mismatches.\n- ds dense Chain@5: table " in out.read_text()


def test_answer_counts_are_checked(tmp_path: Path) -> None:
    reports = _reports(tmp_path)
    path = reports / "metrics/ds/qa-bm25.json"
    stored = json.loads(path.read_text())
    stored.update({"n_failed": 0, "reader_tokens_per_question": 107.0, "question_filter": "gold_reliable"})
    path.write_text(json.dumps(stored))
    check = cc.check_file(reports, path)
    assert check is not None and check.status == "MISMATCH"
    assert check.problems == ["question_filter: gold all, JSON gold_reliable",
                              "n_failed: answers 1, JSON 0",            # q4: no answer row
                              "reader_tokens_per_question: answers 106.00, JSON 107.0"]


def test_missing_per_question_lists_only_absent_tables(tmp_path: Path) -> None:
    reports = _reports(tmp_path)
    (reports / "eval/ds").mkdir(parents=True)
    for name in ("bm25", "dense", "qa-bm25"):
        (reports / f"eval/ds/{name}.parquet").write_bytes(b"")
    (reports / "metrics/ds/empty.json").write_text(json.dumps({"n_questions": 0}))
    assert cc.missing_per_question(reports / "metrics", reports / "eval") == ["ds/notrun"]
