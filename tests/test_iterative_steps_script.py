"""``scripts/iterative_steps.py``: which retrieval step first found each gold passage."""

from __future__ import annotations

import pandas as pd

from scripts.iterative_steps import expansion_only, first_step, step_shares


def test_first_step_counts_the_earliest_retrieval() -> None:
    steps = [["a", "x"], ["b", "a"], ["c"]]
    assert first_step(["a", "b", "z"], steps) == {"a": 1, "b": 2, "z": None}


def test_shares_are_over_all_gold_passages() -> None:
    questions = pd.DataFrame({"question_id": ["q1", "q2"],
                              "gold_passage_ids": [["a", "b"], ["c", "d"]]})
    traces = pd.DataFrame({"question_id": ["q1", "q2"],
                           "step_retrieved_ids": [[["a"], ["b"]], [["x"], ["y"]]]})
    shares = step_shares(traces, questions)
    assert shares == {"gold_passages": 4, "first_step_pct": 25.0, "later_steps_pct": 25.0,
                      "never_pct": 50.0, "questions_gaining_later": 1}


def test_expansion_only_counts_gold_that_no_retrieval_step_reached() -> None:
    questions = pd.DataFrame({"question_id": ["q1", "q2"],
                              "gold_passage_ids": [["a", "b"], ["c", "d"]]})
    traces = pd.DataFrame({"question_id": ["q1", "q2"],
                           "step_retrieved_ids": [[["a"]], [["x"], ["c"]]],
                           "expanded_ids": [[["a", "b"]], [["c"], []]]})
    # q1: b only by expansion (a was retrieved); q2: c was retrieved later, so not counted.
    assert expansion_only(traces, questions) == {"expansion_only_pct": 25.0,
                                                 "questions_gaining_by_expansion": 1}
    assert expansion_only(traces.drop(columns="expanded_ids"), questions) == {}
