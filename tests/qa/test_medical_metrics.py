"""GraphRAG-Bench Medical metrics on hand-made examples: ROUGE-L, F-beta, similarity,
correctness, per-type means and ACC."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import polars as pl
import pytest

from evichain.qa.medical_metrics import (
    METRICS_BY_TYPE, answer_correctness, fbeta, fraction_true, lcs_length, mean_accuracy,
    metrics_for, rouge_l, rouge_tokens, scaled_similarity, type_summary,
)


def test_rouge_tokens_lowercase_split_and_stem_long_tokens_only() -> None:
    assert rouge_tokens("The CATS were running, e.g. fast!") == ["the", "cat", "were", "run", "e", "g", "fast"]
    assert rouge_tokens("BCC's UV-rays") == ["bcc", "s", "uv", "rai"]  # 'rays' (4 chars) is stemmed
    assert rouge_tokens("  ") == []


def test_lcs_length_hand_examples() -> None:
    assert lcs_length(list("abcbdab"), list("bdcaba")) == 4
    assert lcs_length(["a"], []) == 0
    assert lcs_length(["x", "y"], ["x", "y"]) == 2


def test_rouge_l_f_measure() -> None:
    # LCS(the cat sat on the mat, the cat is on the mat) = "the cat on the mat" = 5; P = R = 5/6
    assert rouge_l("the cat sat on the mat", "the cat is on the mat") == pytest.approx(5 / 6)
    # pred 2 tokens, ref 4 tokens, LCS 2: P = 1, R = 0.5, F = 2/3
    assert rouge_l("basal carcinoma", "basal cell carcinoma risk") == pytest.approx(2 / 3)
    assert rouge_l("", "anything") == 0.0 and rouge_l("x", " ") == 0.0
    assert rouge_l("alpha", "beta") == 0.0
    assert rouge_l("Running cats", "run cat") == 1.0  # stemming


def test_fbeta_counts() -> None:
    assert fbeta(2, 1, 1) == pytest.approx(2 / 3)
    assert fbeta(1, 0, 3) == pytest.approx(0.4)  # P = 1, R = 0.25
    assert fbeta(1, 0, 3, beta=2.0) == pytest.approx(5 * 0.25 / (4 + 0.25))
    assert fbeta(0, 2, 2) == 0.0
    assert fbeta(0, 0, 0) == 1.0


def test_scaled_similarity_and_correctness() -> None:
    a = np.array([1.0, 0.0])
    assert scaled_similarity(a, a) == pytest.approx(1.0)
    assert scaled_similarity(a, -a) == pytest.approx(0.0)
    assert scaled_similarity(a, np.array([0.0, 2.0])) == pytest.approx(0.5)
    assert answer_correctness(0.4, 0.8) == pytest.approx(0.75 * 0.4 + 0.25 * 0.8)
    assert answer_correctness(1.0, 0.0, (1.0, 1.0)) == pytest.approx(0.5)
    assert fraction_true([True, False, True, True]) == 0.75
    assert math.isnan(fraction_true([]))


def test_metrics_by_type_match_the_benchmark() -> None:
    assert metrics_for("Fact Retrieval") == ("correctness", "rouge_l")
    assert metrics_for("Creative Generation") == ("correctness", "coverage", "faithfulness")
    assert sum(len(m) for m in METRICS_BY_TYPE.values()) == 9  # EviReform Table B.3: nine metrics
    with pytest.raises(ValueError, match="unknown GraphRAG-Bench question type"):
        metrics_for("Trivia")


def _rows() -> pd.DataFrame:
    nan = math.nan
    rows = [
        ("Fact Retrieval", "ok", 0.8, 0.5, nan, nan, False),
        ("Fact Retrieval", "judge_failed", nan, 0.3, nan, nan, True),
        ("Complex Reasoning", "ok", 0.6, 0.2, nan, nan, False),
        ("Contextual Summarize", "answer_failed", 0.0, nan, 0.0, nan, False),
        ("Contextual Summarize", "ok", 0.5, nan, 0.5, nan, False),
        ("Creative Generation", "ok", 0.4, nan, 0.25, 1.0, False),
    ]
    return pd.DataFrame(rows, columns=["type", "status", "correctness", "rouge_l", "coverage",
                                       "faithfulness", "idk"])


def test_type_summary_means_exclude_nan_and_count_statuses() -> None:
    per_type = type_summary(_rows())
    assert type_summary(pl.from_pandas(_rows())) == per_type  # polars in, the same summary
    fr = per_type["Fact Retrieval"]
    assert fr["n"] == 2 and fr["n_judge_failed"] == 1 and fr["n_idk"] == 1
    assert fr["correctness"] == pytest.approx(0.8) and fr["n_correctness"] == 1
    assert fr["rouge_l"] == pytest.approx(0.4) and fr["n_rouge_l"] == 2
    cs = per_type["Contextual Summarize"]
    assert cs["n_answer_failed"] == 1 and cs["correctness"] == pytest.approx(0.25)
    assert "rouge_l" not in cs and per_type["Creative Generation"]["faithfulness"] == 1.0
    # ACC = unweighted mean over types (not over questions)
    assert mean_accuracy(per_type) == pytest.approx((0.8 + 0.6 + 0.25 + 0.4) / 4)


def test_acc_is_undefined_when_a_type_has_no_correctness() -> None:
    rows = _rows()
    rows = rows[rows["type"] != "Creative Generation"]
    per_type = type_summary(rows)
    assert per_type["Creative Generation"]["n"] == 0 and per_type["Creative Generation"]["correctness"] is None
    assert mean_accuracy(per_type) is None
