"""The paper-shaped report from fixture metrics and per-question tables."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest

from evichain.report import main_report as mr


def _write(root: Path, ds: str, name: str, data: dict) -> None:
    (root / ds).mkdir(parents=True, exist_ok=True)
    (root / ds / f"{name}.json").write_text(json.dumps(data))


def _row(table: pl.DataFrame, method: str) -> dict:
    """The cells of ``method``'s row of a report table (its ``method`` column first)."""
    return table.row(by_predicate=pl.col("method") == method, named=True)


def _cells(table: pl.DataFrame, method: str) -> list:
    """``method``'s cells after the label."""
    return list(table.row(by_predicate=pl.col("method") == method))[1:]


def test_main_table_marks_na_and_ne(tmp_path: Path) -> None:
    _write(tmp_path, "2wiki", "bm25", {"n_questions": 10, "Recall@5": 0.5, "Recall@10": 0.6})
    _write(tmp_path, "2wiki", "qa-bm25", {"n_questions": 10, "EM": 0.2, "F1": 0.3})
    _write(tmp_path, "medical", "bm25", {"n_questions": 0})
    metrics = mr.load_metrics(tmp_path, ["2wiki", "medical", "musique"])
    table = mr.main_table(metrics, ["2wiki", "medical", "musique"], ["Recall@5", "F1"])
    row = _row(table, "bm25")
    assert row["2wiki Recall@5"] == 0.5 and row["2wiki F1"] == 0.3
    assert row["medical Recall@5"] == "N/A" and row["musique Recall@5"] == "N/E"


def test_bootstrap_section_pairs_methods(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    folder = tmp_path / "2wiki"
    folder.mkdir()
    qids = [f"q{i}" for i in range(50)]
    for name, p in (("ref", 0.8), ("other", 0.5), ("ircot", 1.0)):
        pd.DataFrame({"question_id": qids, "Recall@5": rng.binomial(1, p, 50).astype(float),
                      "gold_reliable": True}).to_parquet(folder / f"{name}.parquet")
    pd.DataFrame({"question_id": qids, "EM": 1.0, "F1": 1.0}).to_parquet(folder / "qa-ircot.parquet")
    md, boot = mr.bootstrap_section(mr.per_question_tables(folder), "2wiki", "ref", ["Recall@5", "EM"], 500)
    diff = boot.filter((pl.col("kind") == "difference") & (pl.col("metric") == "Recall@5")).row(0, named=True)
    assert diff["comparator"] == "other" and diff["ci_low"] <= diff["mean"] <= diff["ci_high"]
    assert "Difference [95% CI]" in md
    assert set(boot.filter(pl.col("metric") == "Recall@5")["method"]) == {"ref", "other"}
    assert "| ircot | 100.00 [100.00, 100.00] | N/A |" in md    # first-retrieval order: no CI
    assert "| other | N/E |" in md                                # no answers read: not evaluated
    assert "Not in these CIs" not in md


def test_methods_without_a_per_question_table_are_named(tmp_path: Path) -> None:
    folder = tmp_path / "musique"
    folder.mkdir()
    qids = [f"q{i}" for i in range(20)]
    for name in ("bm25", "dense"):
        pd.DataFrame({"question_id": qids, "Recall@5": 0.5}).to_parquet(folder / f"{name}.parquet")
    md, boot = mr.bootstrap_section(mr.per_question_tables(folder), "musique", "bm25", ["Recall@5"], 200,
                                    evaluated=["bm25", "dense", "hyde", "proprag"])
    assert boot.height
    assert md.endswith("re-run their evaluate stage): `hyde`, `proprag`.")
    alone, _ = mr.bootstrap_section(mr.per_question_tables(tmp_path / "none"), "musique", "bm25",
                                    ["Recall@5"], 200, evaluated=["bm25"])
    assert alone.startswith("Not in these CIs") and "`bm25`" in alone


def test_per_dataset_blocks_keep_only_evaluated_methods(tmp_path: Path) -> None:
    _write(tmp_path, "2wiki", "bm25", {"n_questions": 10, "Recall@5": 0.5, "Recall@10": 0.6})
    _write(tmp_path, "musique", "dense", {"n_questions": 7, "Recall@5": 0.4, "Recall@10": 0.5,
                                          "retrieval_tokens_per_question": 0.0})
    _write(tmp_path, "musique", "evireform-full", {"n_questions": 7, "Recall@5": 0.7,
                                                   "retrieval_tokens_per_question": 5000.0})
    datasets = ["2wiki", "medical", "musique"]
    metrics = mr.load_metrics(tmp_path, datasets)
    blocks = dict(mr.per_dataset(mr.main_table(metrics, datasets, ["Recall@5", "Recall@10"]), datasets))
    assert list(blocks) == ["2wiki", "musique"]  # medical: nothing evaluated
    assert blocks["2wiki"]["method"].to_list() == ["bm25"]
    assert blocks["musique"].columns == ["method", "Recall@5", "Recall@10"]
    assert _row(blocks["musique"], "evireform-full")["Recall@10"] == "N/E"
    cost = mr.cost_table(metrics, datasets)
    assert _row(cost, "evireform-full")["2wiki retrieval"] == "N/E"  # not run there: not "N/A"
    assert _row(cost, "evireform-full")["musique retrieval"] == 5000.0
    assert mr.question_counts(metrics) == {"2wiki": 10, "medical": 0, "musique": 7}
    text = mr.render("setup", mr.main_table(metrics, datasets, ["Recall@5"]),
                     mr.main_table(metrics, datasets, ["Recall@5"]), cost, [], [],
                     counts=mr.question_counts(metrics))
    assert "### musique (7 questions)" in text and "### medical\n" not in text
    assert "GraphRAG-Bench" not in text
    with_medical = mr.render("setup", mr.main_table(metrics, datasets, ["Recall@5"]),
                             mr.main_table(metrics, datasets, ["Recall@5"]), cost, [], [],
                             medical="## GraphRAG-Bench Medical\n\ntable")
    assert (with_medical.index("## GraphRAG-Bench Medical")
            < with_medical.index("## Metric definitions"))


def test_retrieval_report_marks_first_retrieval_order() -> None:
    from evichain.report.retrieval_report import dataset_section

    values = {"n_questions": 4, "Recall@5": 0.5}
    md = dataset_section("musique", {"dense": values, "ircot": values}, "Setup.", None)
    assert "| ircot |" in md and "ircot: iterative methods return evidence, not a ranking" in md
    assert "not a ranking" not in dataset_section("musique", {"dense": values}, "Setup.", None)


def test_pending_line_names_scheduled_methods_without_metrics(tmp_path: Path) -> None:
    _write(tmp_path, "musique", "bm25", {"n_questions": 100, "Recall@5": 0.4})
    _write(tmp_path, "musique", "gear", {"n_questions": 100, "Recall@5": 0.5})
    metrics = mr.load_metrics(tmp_path, ["musique", "demo"])
    line = mr.pending_line({"musique": ["bm25", "gear", "s2g_rag", "s2g_rag"], "demo": ["bm25"]},
                           metrics)
    assert "musique: `s2g_rag`" in line and "`gear`" not in line
    assert "demo: `bm25`" in line and line.count("s2g_rag") == 1
    _write(tmp_path, "musique", "s2g_rag", {"n_questions": 100})
    _write(tmp_path, "demo", "bm25", {"n_questions": 4})
    assert mr.pending_line({"musique": ["s2g_rag"], "demo": ["bm25"]},
                           mr.load_metrics(tmp_path, ["musique", "demo"])) == ""


def test_pending_answers_line_names_methods_without_em(tmp_path: Path) -> None:
    _write(tmp_path, "musique", "dense", {"n_questions": 100, "Recall@5": 0.5})  # ranked, not read
    _write(tmp_path, "musique", "qa-direct", {"n_questions": 100, "EM": 0.0, "F1": 0.05})
    metrics = mr.load_metrics(tmp_path, ["musique"])
    line = mr.pending_answers_line({"musique": ["direct", "dense", "ircot"]}, metrics)
    assert "musique: `dense`, `ircot`" in line and "`direct`" not in line  # EM 0.0 is a result
    _write(tmp_path, "musique", "qa-dense", {"n_questions": 100, "EM": 0.1, "F1": 0.2})
    assert mr.pending_answers_line({"musique": ["direct", "dense"]},
                                   mr.load_metrics(tmp_path, ["musique"])) == ""


def test_one_read_gives_both_report_views(tmp_path: Path) -> None:
    _write(tmp_path, "2wiki", "dense", {"n_questions": 4, "Recall@5": 0.5})
    _write(tmp_path, "2wiki", "qa-dense", {"n_questions": 4, "EM": 0.25, "F1": 0.4})
    _write(tmp_path, "2wiki", "medqa-dense", {"n_questions": 4, "accuracy": 0.5})
    raw = mr.read_metric_files(tmp_path, ["2wiki", "absent"])
    assert sorted(raw["2wiki"]) == ["dense", "medqa-dense", "qa-dense"] and raw["absent"] == {}
    assert mr.retrieval_metrics(raw["2wiki"]) == {"dense": {"n_questions": 4, "Recall@5": 0.5}}
    folded = mr.fold_metrics(raw["2wiki"])
    assert list(folded) == ["dense"]
    assert folded["dense"]["EM"] == 0.25 and folded["dense"]["n_qa"] == 4
    assert folded["dense"]["Recall@5"] == 0.5
    assert mr.load_metrics(tmp_path, ["2wiki"]) == {"2wiki": folded}


def test_direct_inference_recall_is_not_applicable(tmp_path: Path) -> None:
    _write(tmp_path, "musique", "qa-direct", {"n_questions": 100, "EM": 0.0, "F1": 0.05})
    _write(tmp_path, "musique", "dense", {"n_questions": 100, "Recall@5": 0.5})
    table = mr.main_table(mr.load_metrics(tmp_path, ["musique"]), ["musique"], ["Recall@5", "EM"])
    assert _row(table, "direct")["musique Recall@5"] == "N/A"  # retrieves nothing: not "not run"
    assert _row(table, "dense")["musique EM"] == "N/E"


def test_gear_recall_is_shown_as_evireform_shows_it(tmp_path: Path) -> None:
    """EviReform's Table A.1 scores GeAR's final evidence as a ranking (its 2Wiki R@5/R@10
    comparator); IRCoT, Self-Ask and S2G-RAG stay N/A (§C.1)."""
    for m in ("gear", "ircot", "self_ask", "s2g_rag"):
        _write(tmp_path, "2wiki_s", m, {"n_questions": 100, "Recall@5": 0.665, "Recall@10": 0.785})
    table = mr.main_table(mr.load_metrics(tmp_path, ["2wiki_s"]), ["2wiki_s"], ["Recall@5", "Recall@10"])
    assert _cells(table, "gear") == [0.665, 0.785]
    for m in ("ircot", "self_ask", "s2g_rag"):
        assert _cells(table, m) == ["N/A", "N/A"]
    folder = tmp_path / "eval"
    folder.mkdir()
    qids = [f"q{i}" for i in range(40)]
    for name, value in (("gear", 0.5), ("ircot", 1.0), ("proprag", 0.75)):
        pd.DataFrame({"question_id": qids, "Recall@5": value}).to_parquet(folder / f"{name}.parquet")
    md, boot = mr.bootstrap_section(mr.per_question_tables(folder), "2wiki_s", "proprag", ["Recall@5"], 200)
    assert "| gear | 50.00 [50.00, 50.00] |" in md and "| ircot |" not in md
    assert set(boot["method"]) == {"gear", "proprag"}


def test_ranking_note_says_what_gear_recall_counts(tmp_path: Path) -> None:
    note = mr.ranking_note("evidence")
    assert "final merged evidence list" in note and "Table A.1" in note
    assert "`iterative.gear.run_order: evidence`" in note
    assert "`ircot`, `s2g_rag`, `self_ask`: N/A, as in EviReform §C.1" in note
    assert "order of first retrieval. This is not the merged" in mr.ranking_note("first_retrieval")
    with pytest.raises(ValueError, match="iterative.gear.run_order 'other'"):
        mr.ranking_note("other")
    _write(tmp_path, "2wiki_s", "gear", {"n_questions": 100, "Recall@5": 0.665})
    metrics = mr.load_metrics(tmp_path, ["2wiki_s"])
    table = mr.main_table(metrics, ["2wiki_s"], ["Recall@5"])
    text = mr.render("setup", table, table, mr.cost_table(metrics, ["2wiki_s"]), [], ["figures/x.png"],
                     ranking=note, figure_notes=["NOT DRAWN"], index_stats="## Index statistics\n")
    assert text.index("| gear |") < text.index(note) < text.index("## Retrieval decomposition")
    assert text.index("![figures/x.png]") < text.index("NOT DRAWN") < text.index("## Index statistics")
