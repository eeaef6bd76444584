"""Retrieval metrics: hand-computed example, trec_eval agreement, input validation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import pytrec_eval

from evichain.metrics.retrieval import aggregate, per_question_metrics

KS = [1, 2, 5, 20]


@pytest.fixture
def questions() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "question_id": ["q1", "q2", "q3", "q4", "q5"],
            "gold_passage_ids": [["a", "b"], ["c", "d", "e"], ["f"], ["g"], []],
        }
    )


@pytest.fixture
def run() -> pd.DataFrame:
    rows = [
        # q1: b (rank 2) ties x (rank 3) on score; trec_eval's own tie-break (docid descending)
        # would put x first, the method's rank must win.
        ("q1", 1, "a", 0.9), ("q1", 2, "b", 0.5), ("q1", 3, "x", 0.5),
        ("q2", 1, "z", 0.9), ("q2", 2, "c", 0.8), ("q2", 3, "w", 0.7), ("q2", 4, "e", 0.6),
        ("q3", 1, "u", 0.9), ("q3", 2, "v", 0.8),  # gold f never retrieved
        # q4: no rows at all; q5: empty gold
        ("q9", 1, "a", 1.0),  # question not in the questions table: ignored
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=["question_id", "rank", "passage_id", "score"])


def _ndcg(positions: list[int], n_gold: int) -> float:
    dcg = sum(1 / math.log2(p + 1) for p in positions)
    return dcg / sum(1 / math.log2(i + 1) for i in range(1, min(n_gold, 10) + 1))


def test_hand_computed_example(run: pd.DataFrame, questions: pd.DataFrame) -> None:
    table = per_question_metrics(run, questions, KS).set_index("question_id")
    expected = {
        "q1": {"Recall@1": 0.5, "Recall@2": 1.0, "Recall@5": 1.0, "Recall@20": 1.0,
               "Chain@1": 0.0, "Chain@2": 1.0, "Chain@5": 1.0, "Chain@20": 1.0,
               "Hit@1": 1.0, "Hit@2": 1.0, "Hit@5": 1.0, "Hit@20": 1.0,
               "MAP@10": (1 / 1 + 2 / 2) / 2, "nDCG@10": 1.0},
        "q2": {"Recall@1": 0.0, "Recall@2": 1 / 3, "Recall@5": 2 / 3, "Recall@20": 2 / 3,
               "Chain@1": 0.0, "Chain@2": 0.0, "Chain@5": 0.0, "Chain@20": 0.0,
               "Hit@1": 0.0, "Hit@2": 1.0, "Hit@5": 1.0, "Hit@20": 1.0,
               "MAP@10": (1 / 2 + 2 / 4) / 3, "nDCG@10": _ndcg([2, 4], 3)},
    }  # fmt: skip
    for qid, values in expected.items():
        for col, value in values.items():
            assert table.loc[qid, col] == pytest.approx(value, abs=1e-12), (qid, col)
    assert (table.loc[["q3", "q4"]] == 0.0).all().all()  # not retrieved / empty run: zeros, kept
    assert list(table.index) == ["q1", "q2", "q3", "q4"]


def test_columns_exclusion_and_aggregate(run: pd.DataFrame, questions: pd.DataFrame) -> None:
    table = per_question_metrics(run, questions, KS)
    assert list(table.columns) == [
        "question_id",
        *[f"{f}@{k}" for f in ("Recall", "Chain", "Hit") for k in KS],
        "MAP@10",
        "nDCG@10",
    ]
    assert table.attrs["excluded_empty_gold"] == ["q5"]
    agg = aggregate(table)
    assert agg["n_questions"] == 4 and agg["n_excluded_empty_gold"] == 1
    assert agg["Recall@5"] == pytest.approx((1 + 2 / 3) / 4)
    assert agg["Chain@2"] == pytest.approx(0.25)


def test_rank_order_not_row_order_and_positional_cutoffs(questions: pd.DataFrame) -> None:
    shuffled = pd.DataFrame(
        {"question_id": ["q1"] * 3, "rank": [30, 10, 20], "passage_id": ["b", "x", "a"],
         "score": [0.0, 0.0, 0.0]}
    )  # fmt: skip
    row = per_question_metrics(shuffled, questions.iloc[:1], [1, 2, 3]).iloc[0]
    assert (row["Recall@1"], row["Recall@2"], row["Chain@2"], row["Chain@3"]) == (0, 0.5, 0, 1)


@pytest.mark.parametrize("col", ["passage_id", "rank"])
def test_duplicates_in_run_are_rejected(questions: pd.DataFrame, col: str) -> None:
    run = pd.DataFrame(
        {"question_id": ["q1", "q1"], "rank": [1, 2], "passage_id": ["a", "b"], "score": [1, 1]}
    )
    run[col] = run[col].iloc[0]
    with pytest.raises(ValueError, match=col):
        per_question_metrics(run, questions, KS)


def _random_case(seed: int = 7) -> tuple[pd.DataFrame, pd.DataFrame, dict, dict]:
    """100 queries, 40-passage corpus, 1-12 gold, runs of 0-20 distinct passages."""
    rng = np.random.default_rng(seed)
    qrows, rrows, qrels, trec_run = [], [], {}, {}
    for i in range(100):
        qid = f"q{i:03d}"
        gold = [f"p{j}" for j in rng.choice(40, size=int(rng.integers(1, 13)), replace=False)]
        ranked = [f"p{j}" for j in rng.choice(40, size=int(rng.integers(0, 21)), replace=False)]
        qrows.append((qid, gold))
        qrels[qid] = {g: 1 for g in gold}
        rrows += [(qid, r + 1, pid, 1.0) for r, pid in enumerate(ranked)]  # all scores tie
        if ranked:
            trec_run[qid] = {pid: float(len(ranked) - r) for r, pid in enumerate(ranked)}
    questions = pd.DataFrame(qrows, columns=["question_id", "gold_passage_ids"])
    run = pd.DataFrame(rrows, columns=["question_id", "rank", "passage_id", "score"])
    return questions, run, qrels, trec_run


def test_agrees_with_pytrec_eval_and_brute_force() -> None:
    questions, run, qrels, trec_run = _random_case()
    ks = [1, 2, 5, 10, 20]
    ours = per_question_metrics(run, questions, ks).set_index("question_id")
    names = {"recall." + ",".join(map(str, ks)), "map_cut.10", "ndcg_cut.10"}
    ref = pytrec_eval.RelevanceEvaluator(qrels, names).evaluate(trec_run)
    ranked = run.groupby("question_id")["passage_id"].apply(list).to_dict()
    for qid, gold in zip(questions["question_id"], questions["gold_passage_ids"], strict=True):
        r = ref.get(qid, {})
        assert ours.loc[qid, "MAP@10"] == pytest.approx(r.get("map_cut_10", 0.0), abs=1e-12)
        assert ours.loc[qid, "nDCG@10"] == pytest.approx(r.get("ndcg_cut_10", 0.0), abs=1e-12)
        for k in ks:
            top = set(ranked.get(qid, [])[:k])
            assert ours.loc[qid, f"Recall@{k}"] == pytest.approx(r.get(f"recall_{k}", 0.0))
            assert ours.loc[qid, f"Recall@{k}"] == pytest.approx(len(top & set(gold)) / len(gold))
            assert ours.loc[qid, f"Chain@{k}"] == float(set(gold) <= top)
            assert ours.loc[qid, f"Hit@{k}"] == float(bool(top & set(gold)))


def test_ap_denominator_is_number_of_relevant_not_min_r_10() -> None:
    gold = [f"g{i}" for i in range(12)]
    questions = pd.DataFrame({"question_id": ["q"], "gold_passage_ids": [gold]})
    run = pd.DataFrame(
        {"question_id": ["q"] * 10, "rank": range(1, 11), "passage_id": gold[:10], "score": 0.0}
    )
    row = per_question_metrics(run, questions, [10]).iloc[0]
    assert row["MAP@10"] == pytest.approx(10 / 12)  # min(R, 10) would give 1.0
    assert row["nDCG@10"] == pytest.approx(1.0)  # ideal DCG is cut at 10 too


def test_tokens_per_question_sums_every_token_column() -> None:
    from evichain.metrics.cost import tokens_per_question

    trace = pd.DataFrame({"question_id": ["a", "b"], "sel_prompt_tokens": [10, 20],
                          "sel_completion_tokens": [1, 3], "ref_prompt_tokens": [5, None],
                          "n_selected": [4, 4]})
    assert tokens_per_question(trace) == 19.5  # (16 + 23) / 2; n_selected is not a token column
    assert tokens_per_question(trace[["question_id", "n_selected"]]) is None
