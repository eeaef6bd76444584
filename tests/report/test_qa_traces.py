"""``evichain qa-traces`` (:mod:`evichain.report.qa_traces`): reader answers split by what the
reader's context held."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from evichain.cli import app
from evichain.paths import DatasetPaths
from evichain.report.qa_traces import context_group, report, summary, traces

TEXTS = {"p1": "Lothair II was the son of Ermengarde of Tours.",
         "p2": "Ermengarde of Tours died on 20 March 851.",
         "p3": "Lothair I was Emperor."}


def test_groups_follow_the_context() -> None:
    golds = ["20 March 851"]
    assert context_group(["p1", "p2"], {"p1", "p2"}, golds, TEXTS) == "all gold read"
    assert context_group(["p2", "p3"], {"p1", "p2"}, golds, TEXTS) == "answer in context"
    assert context_group(["p1", "p3"], {"p1", "p2"}, golds, TEXTS) == "answer not in context"
    assert context_group([], {"p1"}, golds, TEXTS) == "no context (direct)"
    # whole-token match after normalisation: "851" alone is not "20 March 851"
    assert context_group(["p3"], {"p1"}, ["Emperor."], TEXTS) == "answer in context"
    assert context_group(["p3"], {"p1"}, ["Empero"], TEXTS) == "answer not in context"


def _fixture(root: Path) -> DatasetPaths:
    paths = DatasetPaths("ds", root)
    (paths.dir / "qa").mkdir(parents=True)
    pd.DataFrame({"passage_id": list(TEXTS), "title": ["A", "B", "C"], "text": list(TEXTS.values())}
                 ).to_parquet(paths.corpus)
    pd.DataFrame({"question_id": ["q1", "q2", "q3"],
                  "answers": [["20 March 851"], ["20 March 851"], []],
                  "gold_passage_ids": [["p1", "p2"], ["p1", "p2"], ["p1"]]}).to_parquet(paths.questions)
    pd.DataFrame({"question_id": ["q1", "q2", "q3"], "prediction": ["20 March 851", "Unknown.", "x"],
                  "status": ["ok", "ok", "ok"], "context_passage_ids": [["p1", "p2"], ["p1", "p3"], ["p1"]]}
                 ).to_parquet(paths.qa("m"))
    return paths


def test_traces_score_and_flag_abstentions(tmp_path: Path) -> None:
    per_q = traces(_fixture(tmp_path), "m")
    assert per_q["question_id"].to_list() == ["q1", "q2"]  # q3 has no gold answer: excluded
    assert per_q["group"].to_list() == ["all gold read", "answer not in context"]
    assert per_q["EM"].to_list() == [1.0, 0.0] and per_q["abstain"].to_list() == [False, True]
    rows = {r["group"]: r for r in summary(per_q, "m").iter_rows(named=True)}
    assert rows["all"]["n"] == 2 and rows["all"]["EM"] == 50.0
    assert rows["all"]["abstain %"] == 50.0 and rows["all gold read"]["EM"] == 100.0


def test_command_prints_one_table_for_all_methods(tmp_path: Path) -> None:
    paths = _fixture(tmp_path)
    pd.read_parquet(paths.qa("m")).to_parquet(paths.qa("n"))
    result = CliRunner().invoke(app, ["qa-traces", "ds", "--methods", "m,n", "--root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.output == report(paths, ["m", "n"]) + "\n"
    lines = result.output.splitlines()
    assert lines[0] == "| method | group | n | EM | F1 | abstain % |"
    assert sum(line.startswith("| m | all | 2 | 50.0 |") for line in lines) == 1
    assert sum(line.startswith("| n | all | 2 | 50.0 |") for line in lines) == 1
    missing = CliRunner().invoke(app, ["qa-traces", "ds", "--methods", "x", "--root", str(tmp_path)])
    assert missing.exit_code == 2 and "does not exist" in missing.output
