"""The polars metrics code against ir_measures called directly, and pandas vs polars inputs.

Fixture runs are built here: score ties (the method's rank order must win), a question absent
from the run, a question with an empty gold set, run rows of an unknown question, a run shorter
than the largest cut-off.
"""

from __future__ import annotations

import ir_measures
import numpy as np
import pandas as pd
import polars as pl
import pytest
from ir_measures import AP, R, Success, nDCG
from polars.testing import assert_frame_equal

from evichain.metrics.bootstrap import bootstrap_table
from evichain.metrics.cost import tokens_per_question
from evichain.metrics.qa import qa_frame
from evichain.metrics.retrieval import aggregate, per_question_frame, per_question_metrics

KS = [1, 2, 3, 5, 10]


def _fixture() -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(7)
    gold = {"q1": ["a", "b"], "q2": ["c"], "q3": ["d", "e", "f"], "q4": ["a"], "q5": []}
    rows = []
    for qid in ("q1", "q2", "q3", "zz"):  # q4: not retrieved; zz: unknown question
        pids = rng.permutation(list("abcdefghijklmn"))[: 4 if qid == "q2" else 12]
        rows += [(qid, str(p), r + 1, 1.0 if r < 6 else 0.5) for r, p in enumerate(pids)]  # ties
    run = pd.DataFrame(rows, columns=["question_id", "passage_id", "rank", "score"])
    run = run.sample(frac=1.0, random_state=3)  # the rank column, not the row order, decides
    questions = pd.DataFrame({"question_id": list(gold), "gold_passage_ids": [np.array(v, dtype=object)
                                                                             for v in gold.values()]})
    return run, questions


def _direct(run: pd.DataFrame, questions: pd.DataFrame) -> dict[str, dict[str, float]]:
    """ir_measures on pandas frames, score = -rank, no code of ours in between."""
    qrels = pd.DataFrame([(q, p, 1) for q, ps in zip(questions["question_id"], questions["gold_passage_ids"])
                          for p in ps], columns=["query_id", "doc_id", "relevance"])
    known = run[run["question_id"].isin(set(qrels["query_id"]))]
    scored = pd.DataFrame({"query_id": known["question_id"], "doc_id": known["passage_id"],
                           "score": -known["rank"].astype(float)})
    measures = {**{f"Recall@{k}": R @ k for k in KS}, **{f"Hit@{k}": Success @ k for k in KS},
                "MAP@10": AP @ 10, "nDCG@10": nDCG @ 10}
    names = {str(m): n for n, m in measures.items()}
    out: dict[str, dict[str, float]] = {}
    for r in ir_measures.pytrec_eval.iter_calc(list(measures.values()), qrels, scored):
        out.setdefault(r.query_id, {})[names[str(r.measure)]] = r.value
    return out


def test_per_question_frame_matches_ir_measures_directly() -> None:
    run, questions = _fixture()
    table, excluded = per_question_frame(pl.from_pandas(run), pl.from_pandas(questions), KS)
    assert excluded == ["q5"] and table["question_id"].to_list() == ["q1", "q2", "q3", "q4"]
    direct = _direct(run, questions)
    for row in table.iter_rows(named=True):
        qid = row.pop("question_id")
        top = run[run["question_id"] == qid].sort_values("rank")["passage_id"].tolist()
        gold = set(questions.set_index("question_id").loc[qid, "gold_passage_ids"])
        for name, value in row.items():
            if name.startswith("Chain@"):
                k = int(name.split("@")[1])
                assert value == float(gold <= set(top[:k])), (qid, name)
            else:
                assert value == pytest.approx(direct.get(qid, {}).get(name, 0.0), abs=1e-12), (qid, name)


def test_pandas_and_polars_inputs_give_the_same_tables_and_json() -> None:
    run, questions = _fixture()
    from_pandas = per_question_metrics(run, questions, KS)
    table, excluded = per_question_frame(pl.from_pandas(run), pl.from_pandas(questions), KS)
    assert_frame_equal(pl.from_pandas(from_pandas), table)
    assert from_pandas.attrs["excluded_empty_gold"] == excluded
    assert aggregate(from_pandas) == aggregate(table, {"excluded_empty_gold": excluded})
    means = aggregate(table, {"excluded_empty_gold": excluded})
    assert means["Recall@10"] == float(np.mean(from_pandas["Recall@10"].to_numpy()))  # same bits
    assert means["n_questions"] == 4 and means["n_excluded_empty_gold"] == 1


def test_qa_frame_pandas_and_polars_agree() -> None:
    preds = pd.DataFrame({"question_id": ["q1", "q2", "q3"], "prediction": ["The Paris", "no", None],
                          "status": ["ok", "ok", "failed"]})
    questions = pd.DataFrame({"question_id": ["q3", "q1", "q2", "q4", "q5"],
                              "answers": [["x"], ["paris", "Paris, France"], ["yes"], ["y"], []]})
    pandas_out, pandas_excluded = qa_frame(preds, questions)
    table, excluded = qa_frame(pl.from_pandas(preds), pl.from_pandas(questions))
    assert_frame_equal(pandas_out, table)
    assert table.rows() == [("q1", 1.0, 1.0, "ok"), ("q2", 0.0, 0.0, "ok"), ("q3", 0.0, 0.0, "failed"),
                            ("q4", 0.0, 0.0, "missing")]
    assert excluded == pandas_excluded == ["q5"]
    assert aggregate(table, {"excluded_no_answer": excluded})["n_failed"] == 2


def test_tokens_per_question_pandas_and_polars_agree() -> None:
    trace = pd.DataFrame({"question_id": ["a", "b", "c"], "sel_prompt_tokens": [10, 20, 31],
                          "ref_completion_tokens": [1.5, np.nan, 2.0], "other": [9, 9, 9]})
    assert tokens_per_question(trace) == tokens_per_question(pl.from_pandas(trace)) == 21.5
    assert tokens_per_question(trace[["question_id", "other"]]) is None


def test_bootstrap_table_pandas_and_polars_inputs_agree() -> None:
    rng = np.random.default_rng(0)
    qids = [f"q{i}" for i in range(30)]
    per_q = {m: pd.DataFrame({"question_id": qids, "Recall@5": rng.integers(0, 3, 30) / 2})
             for m in ("ref", "b", "c")}
    per_q["c"].loc[4, "Recall@5"] = np.nan  # dropped for every method
    a = bootstrap_table(per_q, ["Recall@5"], "d", "ref", n_resamples=200)
    b = bootstrap_table({m: pl.from_pandas(t) for m, t in per_q.items()}, ["Recall@5"], "d", "ref",
                        n_resamples=200)
    assert_frame_equal(a, b)
    assert set(a["n_questions"]) == {29}
