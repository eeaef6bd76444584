"""The reference of the paired-differences figure: the strongest baseline of each dataset (highest
mean Recall@5 among methods that are not EviReform, CEE or ours; ties by Chain@5, then name), and
the n ≥ 30 rule for the rows the figure draws."""

from __future__ import annotations

import polars as pl
import pytest

from evichain.report.differences import (
    PRIMARY_METRIC,
    REFERENCE_RULE,
    baseline_differences,
    drawable,
    strongest_baseline,
)
from evichain.report.figures import MIN_FIGURE_QUESTIONS


def _table(recall: list[float], chain: list[float] | None = None) -> pl.DataFrame:
    data = {"question_id": [f"q{i}" for i in range(len(recall))], "Recall@5": recall}
    return pl.DataFrame({**data, **({"Chain@5": chain} if chain is not None else {})})


def test_the_strongest_baseline_is_the_best_non_ours_method_by_recall_at_5() -> None:
    per_q = {"bm25": _table([0.2, 0.4]), "dense": _table([0.5, 0.5]), "proprag": _table([0.6, 0.8]),
             "evireform-full": _table([1.0, 1.0]), "cee-full": _table([0.9, 0.9]),
             "evireform-fused": _table([1.0, 0.9]), "seeds-fused": _table([1.0, 1.0])}
    assert PRIMARY_METRIC == "Recall@5" and "highest mean Recall@5" in REFERENCE_RULE
    assert strongest_baseline(per_q) == "proprag"
    # A method named as ours is never a baseline, whatever its family.
    assert strongest_baseline(per_q, ours=["proprag"]) == "dense"


def test_gear_competes_and_the_unranked_iterative_methods_do_not() -> None:
    per_q = {"dense": _table([0.5, 0.5]), "gear": _table([0.7, 0.7]), "ircot": _table([1.0, 1.0]),
             "s2g_rag": _table([1.0, 1.0])}
    assert strongest_baseline(per_q) == "gear"


def test_ties_go_to_chain_at_5_then_to_the_name() -> None:
    per_q = {"hyde": _table([0.5, 0.5], [0.0, 0.0]), "bm25": _table([0.5, 0.5], [1.0, 0.0]),
             "dense": _table([0.5, 0.5], [0.0, 1.0]), "lamer": _table([0.4, 0.4], [1.0, 1.0])}
    assert strongest_baseline(per_q) == "bm25"  # bm25 and dense tie on both; bm25 sorts first
    assert strongest_baseline({"b": _table([0.5]), "a": _table([0.5])}, ours=[]) is None  # "other"


def test_no_baseline_means_no_reference_and_no_rows() -> None:
    per_q = {"evireform-full": _table([1.0, 0.5]), "direct": pl.DataFrame({"question_id": ["q0"],
                                                                          "EM": [1.0]})}
    assert strongest_baseline(per_q) is None
    assert baseline_differences(per_q, "demo").height == 0


@pytest.mark.parametrize("n, drawn", [(4, False), (MIN_FIGURE_QUESTIONS - 1, False),
                                      (MIN_FIGURE_QUESTIONS, True), (100, True)])
def test_rows_on_fewer_than_30_questions_are_not_drawable(n: int, drawn: bool) -> None:
    per_q = {"dense": _table([0.5] * n, [0.0] * n), "evireform-full": _table([1.0] * n, [1.0] * n)}
    rows = baseline_differences(per_q, "d", n_resamples=100)
    assert set(rows["reference"]) == {"dense"} and set(rows["n"]) == {n}
    assert rows["difference"].to_list() == [50.0, 100.0]  # points, method − reference
    assert drawable(rows, MIN_FIGURE_QUESTIONS).height == (rows.height if drawn else 0)
