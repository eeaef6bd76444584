"""The report stage publishes no figure computed on fewer than MIN_FIGURE_QUESTIONS questions: a
4-question dataset gets no Recall@K figure and no paired-differences row, a stale figure of it
is deleted, and the notes say why."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from evichain.config import Params, load_params
from evichain.report.figures import MIN_FIGURE_QUESTIONS
from stages import report as stage

REPO = Path(__file__).resolve().parents[2]
METHODS = ("bm25", "dense", "proprag", "gear", "ircot", "evireform-full")


@pytest.fixture
def params(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Params:
    """The repository's params on two datasets, in an empty working directory."""
    p = load_params(REPO / "params.yaml")
    monkeypatch.chdir(tmp_path)
    return p.model_copy(update={"datasets": ["demo", "2wiki_s"], "tuning_datasets": [],
                                "report": p.report.model_copy(update={"bootstrap_resamples": 200})})


def _per_q(n: int) -> dict[str, pl.DataFrame]:
    rng = np.random.default_rng(n)
    qids = [f"q{i}" for i in range(n)]
    return {m: pl.DataFrame({"question_id": qids, "Recall@5": rng.random(n), "Chain@5": rng.random(n)})
            for m in METHODS}


def _scored(n: int) -> dict[str, dict[str, object]]:
    return {m: {"n_questions": n, **{f"Recall@{k}": k / 20 for k in (1, 2, 5, 10, 20)}} for m in METHODS}


def test_no_recall_figure_on_too_few_questions(params: Params) -> None:
    stale = Path("reports/figures/recall_at_k-demo.png")
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    figure, notes = stage._recall_figure(params, "demo", _scored(4), "proprag")
    assert figure is None and not stale.exists()
    assert notes == [f"No Recall@K figure for `demo`: its methods were evaluated on n = 4 questions, "
                     f"fewer than the {MIN_FIGURE_QUESTIONS} a published figure needs (the curves "
                     "would be steps of whole questions); its retrieval table has the values."]
    scored = {**_scored(100), "proprag": {**_scored(100)["proprag"], "n_questions": 10}}
    figure, notes = stage._recall_figure(params, "2wiki_s", scored, "proprag")
    assert figure == "figures/recall_at_k-2wiki_s.png" and Path("reports", figure).is_file()
    assert notes == [f"Left out of the Recall@K figure of `2wiki_s` (fewer than {MIN_FIGURE_QUESTIONS} "
                     "questions): `proprag` (n = 10)."]


def test_paired_differences_leave_small_datasets_out(params: Params) -> None:
    stale = Path("reports/figures/paired_differences.png")
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    diffs, drawn, notes = stage._paired_differences(params, {"demo": _per_q(4), "2wiki_s": _per_q(40)})
    assert drawn == {"2wiki_s"} and set(diffs) == {"demo", "2wiki_s"}
    assert stale.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # redrawn without the demo row
    assert set(diffs["demo"]["n"]) == {4} and list(notes) == ["demo"]
    assert notes["demo"][0].startswith("`demo` is not in the paired-differences figure: its comparisons "
                                       f"rest on n = 4 questions, fewer than {MIN_FIGURE_QUESTIONS}")
    reference = {str(r) for r in diffs["2wiki_s"]["reference"]}
    means = {m: float(t["Recall@5"].mean()) for m, t in _per_q(40).items()  # type: ignore[arg-type]
             if m in ("bm25", "dense", "proprag", "gear")}
    assert reference == {max(means, key=lambda m: means[m])}  # the strongest baseline by R@5
    _, drawn, _ = stage._paired_differences(params, {"demo": _per_q(4), "2wiki_s": _per_q(4)})
    assert drawn == set() and not stale.exists()
