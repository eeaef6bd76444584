"""Paired bootstrap: agreement with a slow reference loop, seeds, pairing, table shape."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from evichain.metrics.bootstrap import (
    BASE_SEED,
    bootstrap_ci,
    bootstrap_table,
    paired_difference_ci,
    resample_indices,
    seed_for,
)

B = 2_000


def _slow_ci(values: np.ndarray, seed: int, n_resamples: int) -> tuple[float, float]:
    """Reference: one resample at a time from the same generator, np.mean, np.percentile."""
    rng = np.random.default_rng(seed)
    means = []
    for _ in range(n_resamples):
        idx = rng.integers(0, len(values), size=len(values), dtype=np.int32)
        means.append(np.mean(values[idx]))
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def test_seed_offset_formula() -> None:
    digest = hashlib.sha256(b"musique/Recall@5").hexdigest()
    assert seed_for("musique", "Recall@5") == 202707 + int(digest[:8], 16) % 2**31
    assert seed_for("musique", "Recall@5") != seed_for("musique", "F1")
    assert seed_for("musique", "F1") != seed_for("hotpotqa", "F1")


@pytest.mark.parametrize("n", [1, 7, 150])
def test_matches_slow_loop(n: int) -> None:
    rng = np.random.default_rng(n)
    # metric-like values (0/1 and k/4): every summation order is exact, so bit-identical
    for values in (rng.integers(0, 2, n).astype(float), rng.integers(0, 5, n) / 4):
        ci = bootstrap_ci(values, n_resamples=B, seed=123)
        assert (ci.low, ci.high) == _slow_ci(values, 123, B)
        assert ci.mean == values.mean()
    # arbitrary floats: same resamples, means equal up to summation-order rounding
    values = rng.random(n)
    ci = bootstrap_ci(values, n_resamples=B, seed=123)
    np.testing.assert_allclose((ci.low, ci.high), _slow_ci(values, 123, B), rtol=0, atol=1e-14)


def test_constant_difference_is_a_point() -> None:
    b = np.random.default_rng(0).integers(0, 4, 300) / 4
    ci = paired_difference_ci(b + 0.25, b, n_resamples=B, seed=BASE_SEED)
    assert ci.low == ci.high == ci.mean == 0.25


def test_pairing_shares_the_index_matrix() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.random(80), rng.random(80)
    idx = resample_indices(80, B, seed=5)
    diff = paired_difference_ci(a, b, indices=idx)
    assert diff == bootstrap_ci(a - b, indices=idx)
    assert diff == paired_difference_ci(a, b, n_resamples=B, seed=5)
    # pairing narrows the interval when the systems are correlated
    unpaired = bootstrap_ci(a + 0.1 * b, indices=idx)
    paired = paired_difference_ci(a + 0.1 * b, a, indices=idx)
    assert paired.high - paired.low < unpaired.high - unpaired.low


def _per_q() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(3)
    qids = [f"q{i:02d}" for i in range(40)]
    out = {
        "ref": pd.DataFrame({"question_id": qids, "R@5": rng.random(40), "F1": rng.random(40)}),
        "weak": pd.DataFrame({"question_id": qids, "R@5": rng.random(40) * 0.5}),
        "strong": pd.DataFrame(
            {"question_id": qids[::-1], "R@5": rng.random(40) * 0.2 + 0.8, "F1": rng.random(40)}
        ),
    }
    out["weak"] = out["weak"].iloc[1:]  # q00 missing: dropped for every method (inner join)
    return out


def test_bootstrap_table_shape_and_values() -> None:
    per_q = _per_q()
    table = bootstrap_table(per_q, ["R@5", "F1"], "2wiki", "ref", n_resamples=B)
    r5 = table.filter(pl.col("metric") == "R@5")
    assert r5["kind"].to_list() == ["score", "score", "score", "difference"]
    assert set(r5["n_questions"]) == {39}
    diff = r5.filter(pl.col("kind") == "difference").row(0, named=True)
    assert (diff["method"], diff["comparator"]) == ("ref", "strong")
    # recompute with the documented seed and the inner-joined, id-sorted questions
    ids = sorted(set(per_q["weak"]["question_id"]))
    ref = per_q["ref"].set_index("question_id").loc[ids, "R@5"].to_numpy()
    strong = per_q["strong"].set_index("question_id").loc[ids, "R@5"].to_numpy()
    idx = resample_indices(39, B, seed_for("2wiki", "R@5"))
    expected = paired_difference_ci(ref, strong, indices=idx)
    assert (diff["mean"], diff["ci_low"], diff["ci_high"]) == (
        expected.mean, expected.low, expected.high,
    )  # fmt: skip
    assert diff["comparator_mean"] == pytest.approx(strong.mean())
    f1_rows = table.filter(pl.col("metric") == "F1")  # "weak" has no F1: skipped, 40 questions
    assert f1_rows["method"].to_list() == ["ref", "strong", "ref"]
    assert set(f1_rows["n_questions"]) == {40}


def test_bootstrap_table_is_deterministic() -> None:
    a = bootstrap_table(_per_q(), ["R@5"], "musique", "ref", n_resamples=500)
    b = bootstrap_table(_per_q(), ["R@5"], "musique", "ref", n_resamples=500)
    assert_frame_equal(a, b)
    c = bootstrap_table(_per_q(), ["R@5"], "hotpotqa", "ref", n_resamples=500)
    assert not a["ci_low"].equals(c["ci_low"])  # another dataset, another seed
