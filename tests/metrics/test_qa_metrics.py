"""EM and token F1 (EviReform Appendix C.4)."""

from __future__ import annotations

import polars as pl
import pytest

from evichain.metrics.qa import EXCLUDED_KEY, exact_match, f1, normalize, qa_frame
from evichain.metrics.retrieval import aggregate


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  An  apple,   a day ", "apple day"),
        ("Theory of the U.S.A.", "theory of usa"),  # "the" inside words is kept
        ("anthem", "anthem"),
        ("", ""),
    ],
)
def test_normalize(text: str, expected: str) -> None:
    assert normalize(text) == expected


def test_articles_and_punctuation_ignored() -> None:
    assert exact_match("the Eiffel Tower.", ["Eiffel tower"]) == 1.0
    assert f1("The Eiffel Tower", ["eiffel tower"]) == 1.0


def test_partial_overlap_token_multisets() -> None:
    # pred tokens {paris, paris, france}, gold {paris}: c = 1 (multiset), p = 1/3, r = 1
    assert f1("Paris Paris France", ["Paris"]) == pytest.approx(2 * (1 / 3) / (1 / 3 + 1))
    assert exact_match("Paris France", ["Paris"]) == 0.0
    assert f1("London", ["Paris"]) == 0.0


def test_yes_no_mismatch_scores_zero() -> None:
    assert f1("yes", ["no"]) == 0.0
    assert f1("no", ["no"]) == 1.0
    assert f1("yes it is", ["yes"]) == 0.0  # gold special, normalized strings differ
    assert f1("no", ["no answer here"]) == 0.0  # prediction special
    assert f1("noanswer", ["noanswer"]) == 1.0


def test_max_over_aliases() -> None:
    golds = ["Barack Obama", "Obama", "President Barack Hussein Obama"]
    assert exact_match("obama", golds) == 1.0
    assert f1("Barack Hussein Obama", golds) == pytest.approx(max(0.8, 2 / 3, 2 * 0.75 / 1.75))


def test_unknown_and_empty_are_ordinary_wrong_answers() -> None:
    assert exact_match("unknown", ["Paris"]) == 0.0 and f1("unknown", ["Paris"]) == 0.0
    assert f1("unknown", ["unknown soldier"]) == pytest.approx(2 / 3)  # not special-cased
    assert exact_match("", ["Paris"]) == 0.0 and f1("", ["Paris"]) == 0.0
    assert exact_match("Paris", []) == 0.0 and f1("Paris", []) == 0.0


def test_qa_frame_failed_and_missing_score_zero() -> None:
    questions = pl.DataFrame(
        {
            "question_id": ["q1", "q2", "q3", "q4", "q5"],
            "answers": [["Paris", "City of Light"], ["yes"], ["Rome"], ["Oslo"], []],
        }
    )
    preds = pl.DataFrame(
        {
            "question_id": ["q1", "q2", "q3"],
            "prediction": ["the city of light", "no", "Rome"],
            "status": ["ok", "ok", "failed"],
        }
    )
    table, excluded = qa_frame(preds, questions)
    row = {r["question_id"]: r for r in table.iter_rows(named=True)}
    assert row["q1"]["EM"] == 1.0 and row["q1"]["F1"] == 1.0
    assert row["q2"]["F1"] == 0.0
    assert row["q3"]["EM"] == 0.0 and row["q3"]["status"] == "failed"
    assert row["q4"]["status"] == "missing" and row["q4"]["F1"] == 0.0
    assert excluded == ["q5"]
    agg = aggregate(table, {EXCLUDED_KEY: excluded})
    assert agg["n_questions"] == 4 and agg["n_failed"] == 2 and agg["n_excluded_no_answer"] == 1
    assert agg["EM"] == pytest.approx(0.25)


def test_repeated_prediction_rejected() -> None:
    preds = pl.DataFrame({"question_id": ["q1", "q1"], "prediction": ["a", "b"], "status": "ok"})
    questions = pl.DataFrame({"question_id": ["q1"], "answers": [["a"]]})
    with pytest.raises(ValueError, match="repeats"):
        qa_frame(preds, questions)
