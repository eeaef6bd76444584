"""Report analyses: EviReform 2×2 with paired contrasts, pool analysis from traces, CEE ablations."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from evichain.metrics.bootstrap import paired_difference_ci, resample_indices, seed_for
from evichain.report.ablations import (
    cee_ablation,
    cee_section,
    evireform_ablation,
    evireform_contrasts,
    evireform_controls,
    evireform_section,
    pool_analysis,
)

CELLS = {"evireform-base": [0.5, 0.5, 1.0, 0.0], "evireform-prop_only": [0.5, 1.0, 1.0, 0.0],
         "evireform-reform_only": [1.0, 0.5, 1.0, 0.5], "evireform-full": [1.0, 1.0, 1.0, 0.5]}


def _per_q() -> dict[str, pl.DataFrame]:
    return {m: pl.DataFrame({"question_id": ["q1", "q2", "q3", "q4"], "Recall@5": v})
            for m, v in CELLS.items()}


def _metrics() -> dict[str, dict[str, float]]:
    return {m: {"Recall@2": float(np.mean(v)), "Recall@5": float(np.mean(v)),
                "Chain@5": float(np.mean(v)), "n_questions": 4} for m, v in CELLS.items()}


def test_two_by_two_cells_in_table_order() -> None:
    table = evireform_ablation(_metrics(), columns=["Recall@5"])
    assert [list(r) for r in table.select("Reformulation", "Propagation").rows()] == [["✗", "✗"], ["✗", "✓"],
                                                                       ["✓", "✗"], ["✓", "✓"]]
    assert table["Recall@5"].to_list() == [50.0, 62.5, 75.0, 87.5]


def test_contrasts_are_paired_differences_with_the_datasets_resamples() -> None:
    table = evireform_contrasts(_per_q(), "toy", columns=["Recall@5"], n_resamples=500)
    rows = {r["contrast"]: r for r in table.iter_rows(named=True)}
    row = rows["reformulation, propagation off"]
    assert row["difference"] == 25.0 and row["n"] == 4          # mean of (0.5, 0, 0, 0.5)
    indices = resample_indices(4, 500, seed_for("toy", "Recall@5"))
    ci = paired_difference_ci(np.array(CELLS["evireform-reform_only"]),
                              np.array(CELLS["evireform-base"]), indices=indices)
    assert (row["ci_low"], row["ci_high"]) == (round(100 * ci.low, 2), round(100 * ci.high, 2))
    both = rows["both (full - base)"]
    assert both["difference"] == 37.5


def test_contrast_needs_both_cells() -> None:
    only = {"evireform-base": _per_q()["evireform-base"]}
    assert evireform_contrasts(only, "toy", columns=["Recall@5"], n_resamples=100).height == 0
    assert evireform_section("toy", {}, {}, 100) == ""


def _trace() -> pl.DataFrame:
    return pl.DataFrame({
        "question_id": ["q1", "q2", "q3"], "n_gold": [2, 2, 2],
        "c0_gold": [2, 1, 0], "cplus_gold": [2, 2, 0], "c0_complete": [True, False, False],
        "cplus_complete": [True, True, False], "gold_in_candidates": [2, 1, 1],
        "gold_selected": [2, 1, 0], "selection_fallback": [False, False, True],
        "residual_fallback": [False, True, False], "selected_ids": [["a"], ["b", "c"], []],
        "n_invalid_ids": [0, 1, 0], "sel_prompt_tokens": [100, 200, 300],
        "sel_completion_tokens": [10, 10, 10], "ref_prompt_tokens": [50, 50, 50],
        "ref_completion_tokens": [5, 5, 5], "judge_prompt_tokens": [0, 0, 0],
        "judge_completion_tokens": [0, 0, 0]})


def test_pool_analysis_tables_a3_a4_on_the_evaluated_questions() -> None:
    out = pool_analysis(_trace(), ["q1", "q2"])
    assert out["questions"] == 2
    c0, cplus = out["coverage"]
    assert (c0["gold_coverage"], c0["complete_chain"]) == (75.0, 50.0)
    assert (cplus["gold_coverage"], cplus["complete_chain"]) == (100.0, 100.0)
    assert out["transitions"] == {"pools_missing_gold": 1, "became_complete": 1,
                                  "gained_but_incomplete": 0, "unchanged": 0, "new_gold_passages": 1}
    assert out["tokens"]["sel_prompt"] == 150.0
    everything = pool_analysis(_trace())
    assert everything["transitions"]["unchanged"] == 1 and everything["questions"] == 3


def test_section_prints_pools_from_the_metrics_json() -> None:
    metrics = _metrics()
    metrics["evireform-full"]["pool_analysis"] = pool_analysis(_trace())
    md = evireform_section("toy", metrics, _per_q(), 200)
    assert "| ✓ | ✓ | evireform-full | 4 | 87.5 | 87.5 | 87.5 |" in md
    assert "Table A.4" in md and "+37.50" in md


def test_controls_panel_contrasts_full_against_each_control_that_ran() -> None:
    metrics, per_q = _metrics(), _per_q()
    control = [1.0, 0.5, 0.5, 0.0]                         # full - control = (0, .5, .5, .5)
    metrics["evireform-repeat_question"] = {"Recall@2": 0.5, "Recall@5": 0.5, "Chain@5": 0.5,
                                            "n_questions": 4}
    per_q["evireform-repeat_question"] = pl.DataFrame({"question_id": ["q1", "q2", "q3", "q4"],
                                                       "Recall@5": control})
    lines = evireform_controls(metrics, per_q, "toy", 300)
    md = "\n".join(lines)
    assert "| evireform-repeat_question | original question repeated" in md
    assert "residual_only" not in md                       # a control that did not run
    indices = resample_indices(4, 300, seed_for("toy", "Recall@5"))
    ci = paired_difference_ci(np.array(CELLS["evireform-full"]), np.array(control), indices=indices)
    assert (f"| Recall@5 | full - repeat_question | 4 | +37.50 [{100 * ci.low:+.2f}, "
            f"{100 * ci.high:+.2f}] |") in md
    assert "Controls" in evireform_section("toy", metrics, per_q, 300)
    assert evireform_controls(_metrics(), _per_q(), "toy", 300) == []   # no control ran
    del metrics["evireform-full"]
    assert evireform_controls(metrics, per_q, "toy", 300) == []        # nothing to compare with


@pytest.mark.parametrize("present", [["cee-full"], ["cee-full", "cee-no_sequential"]])
def test_cee_ablation_rows(present: list[str]) -> None:
    metrics = {m: {"Recall@10": 0.5, "nDCG@10": 0.25, "Chain@10": 0.1, "n_questions": 8} for m in present}
    table = cee_ablation(metrics)
    assert table["method"].to_list() == present and table["Chain@10"].to_list() == [10.0] * len(present)
    assert "FSR@10 = Chain@10" in cee_section("toy", metrics) and cee_section("toy", {}) == ""


def test_cee_ablation_lists_the_baselines_under_it_and_only_with_cee() -> None:
    row = {"Recall@10": 0.5, "nDCG@10": 0.25, "Chain@10": 0.1, "n_questions": 8}
    table = cee_ablation({"dense": row, "cee-full": row, "bm25": row})
    assert table["method"].to_list() == ["cee-full", "bm25", "dense"]
    assert cee_ablation({"dense": row, "bm25": row}).height == 0


FACETS = {"machine_restricted": True, "facet_scope": "reachable", "facet_scope_n": 3,
          "n_neighbours": 10, "max_pairs_per_passage": 1, "passages": 1839,
          "passages_with_facets": 281, "pairs": 281, "facets": 540}


@pytest.mark.parametrize("restricted", [True, False])
def test_cee_section_names_a_machine_restriction_as_such(restricted: bool) -> None:
    metrics = {"cee-full": {"Recall@10": 0.5, "n_questions": 4,
                            "facets": {**FACETS, "machine_restricted": restricted}}}
    md = cee_section("toy", metrics)
    assert "facets for 281 of 1839 passages" in md
    assert ("restricted on this machine (not by the method)" in md) is restricted
    assert ("dense top 3" in md and "1 nearest neighbour(s) instead of 10" in md) is restricted


def test_cee_section_contrasts_full_against_each_ablation_and_the_baselines() -> None:
    values = {"cee-full": [1.0, 1.0, 0.5, 1.0], "cee-no_sequential": [0.5, 0.5, 0.5, 1.0],
              "cee-no_coverage": [1.0, 1.0, 0.5, 1.0], "dense": [0.0, 0.5, 0.5, 0.5]}
    per_q = {m: pl.DataFrame({"question_id": ["q1", "q2", "q3", "q4"], "Recall@10": v})
             for m, v in values.items()}
    metrics = {m: {"Recall@10": float(np.mean(v)), "n_questions": 4} for m, v in values.items()}
    md = cee_section("toy", metrics, per_q, 200)
    lines = {line.split("|")[2].strip(): line for line in md.splitlines()
             if line.startswith("| Recall@10 |")}
    assert "+25.00" in lines["sequential exploration (full - w/o)"]
    assert "+0.00" in lines["coverage-aware final ranking (full - w/o)"]
    assert "+50.00" in lines["full - dense"]
    assert "contrastive refinement (full - w/o)" not in lines and "full - BM25" not in lines
