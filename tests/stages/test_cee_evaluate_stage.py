"""``stages.evaluate_cee``: the evaluate stage's metrics JSON plus the facet index's setup."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from evichain.io import write_parquet
from stages import evaluate_cee

USAGE = {"dataset": "musique", "machine_restricted": True, "facet_scope": "reachable",
         "facet_scope_n": 3, "n_neighbours": 10, "max_pairs_per_passage": 1, "passages": 9,
         "passages_with_facets": 4, "pairs": 4, "pairs_failed": 0, "facets": 7,
         "llm_usage": {"calls": 4}, "seconds": 12.5}


@pytest.mark.parametrize("with_usage", [True, False])
def test_metrics_json_gains_the_facet_setup(tmp_path: Path, with_usage: bool) -> None:
    art = tmp_path / "artifacts" / "musique"
    questions = pd.DataFrame({"question_id": ["q1", "q2"], "question": ["a?", "b?"],
                              "answers": [["x"], ["y"]], "gold_passage_ids": [["p1", "p2"], ["p3"]],
                              "gold_reliable": [True, True]})
    write_parquet(questions, art / "questions.parquet")
    run = pd.DataFrame({"question_id": ["q1", "q1", "q2"], "rank": [1, 2, 1],
                        "passage_id": ["p1", "p9", "p3"], "score": [0.9, 0.5, 0.8]})
    write_parquet(run, art / "runs" / "cee-full.parquet")
    if with_usage:
        (art / "usage").mkdir(parents=True)
        (art / "usage" / "generate_facets.json").write_text(json.dumps(USAGE))
    (tmp_path / "params.yaml").write_text("datasets: [musique]\n")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        evaluate_cee.main(dataset="musique", variant="full", params_file=Path("params.yaml"))
    finally:
        os.chdir(cwd)
    metrics = json.loads((tmp_path / "reports/metrics/musique/cee-full.json").read_text())
    assert metrics["method"] == "cee-full" and metrics["n_questions"] == 2
    assert metrics["Recall@2"] == pytest.approx(0.75)           # (1/2 + 1/1) / 2
    expected = {k: USAGE[k] for k in evaluate_cee.FACET_SETUP_KEYS} if with_usage else {}
    assert metrics["facets"] == expected
