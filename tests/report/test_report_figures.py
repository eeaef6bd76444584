"""The report's figures and per-dataset pages from fixture metrics: methods grouped by family,
iterative methods left out of every ranking plot, paired differences against the reference
computed by the report's contrast code, legends outside the axes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

import evichain.report.figures as figures
from evichain.report import families as fam
from evichain.report.ablations import paired_contrasts
from evichain.report.dataset_pages import dataset_page, differences_table
from evichain.report.differences import FALLBACK_REFERENCE, reference_differences
from evichain.report.main_report import NO_RANKING

METHODS = ["bm25", "dense", "rerank-listwise", "hyde", "lamer", "hipporag2", "proprag",
           "evireform-base", "evireform-full", "cee-full", "cee-no_sequential",
           "evireform-robust", "ircot", "self_ask", "s2g_rag", "gear"]


@pytest.fixture
def recall() -> pd.DataFrame:
    """Recall@K fractions of every fixture method (iterative ones included, as the stage has)."""
    rng = np.random.default_rng(1)
    values = np.sort(rng.random((len(METHODS), 5)), axis=1)
    return pd.DataFrame(values, index=METHODS, columns=[f"Recall@{k}" for k in (1, 2, 5, 10, 20)])


@pytest.fixture
def per_q() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(2)
    qids = [f"q{i}" for i in range(40)]
    return {m: pd.DataFrame({"question_id": qids, "Recall@5": rng.random(40),
                             "Chain@5": rng.binomial(1, 0.4, 40).astype(float)})
            for m in METHODS}


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """The figures the functions draw (still written to disk)."""
    out: list[Figure] = []
    save = figures._save

    def keep(fig: Figure, path: str | Path) -> Path:
        out.append(fig)
        return save(fig, path)

    monkeypatch.setattr(figures, "_save", keep)
    return out


def test_iterative_families_agree_with_the_main_report() -> None:
    assert fam.ITERATIVE == NO_RANKING
    assert all(fam.family(m) == "iterative" for m in NO_RANKING)


def test_families_and_styles_are_stable_across_datasets() -> None:
    assert [fam.family(m) for m in ("bm25", "rerank-listwise", "query2doc", "catrag",
                                    "evireform-full", "cee-no_coverage", "cee-robust", "gear")] == [
        "first-stage", "rerank", "expansion", "graph", "EviReform", "CEE", "ours", "iterative"]
    assert fam.family("evireform-robust", ours=[]) == "EviReform"
    # The style of a method depends on the method only, not on what else is on the plot.
    assert fam.style("evireform-full") == fam.style("evireform-full", fam.OURS)
    within = [fam.style(m) for m in fam.KNOWN["EviReform"]]
    assert len({(s["linestyle"], s["marker"]) for s in within}) == len(within)
    assert len({s["color"] for s in within}) == 1
    assert fam.ordered(["proprag", "bm25", "evireform-robust", "cee-full", "dense"]) == [
        "bm25", "dense", "proprag", "cee-full", "evireform-robust"]


def test_recall_figure_leaves_iterative_methods_out(tmp_path: Path, recall: pd.DataFrame,
                                                    captured: list[Figure]) -> None:
    path = figures.recall_at_k_figure(recall, tmp_path / "r.png", dataset="2wiki_s")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (fig,) = captured
    (ax,) = fig.axes
    drawn = [line.get_label() for line in ax.get_lines()]
    assert drawn == fam.ordered(set(METHODS) - NO_RANKING)
    assert not set(drawn) & NO_RANKING
    # One colour per family; the legend is the figure's, outside the axes, headed by family.
    colours = {fam.family(line.get_label()): line.get_color() for line in ax.get_lines()}
    assert colours["first-stage"] == fam.COLOUR["first-stage"]
    assert ax.get_legend() is None and len(fig.legends) == 1
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts[0] == fam.LABEL["first-stage"] and fam.LABEL["iterative"] not in texts


def test_recall_figure_legend_does_not_overlap_the_axes(tmp_path: Path, recall: pd.DataFrame,
                                                        captured: list[Figure]) -> None:
    figures.recall_at_k_figure(recall, tmp_path / "r.png", dataset="musique")
    (fig,) = captured
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    axes_box = fig.axes[0].get_window_extent(renderer)
    legend_box = fig.legends[0].get_window_extent(renderer)
    assert legend_box.x0 >= axes_box.x1 - 1  # at most a pixel of padding


def test_only_iterative_methods_still_draw(tmp_path: Path, recall: pd.DataFrame) -> None:
    out = figures.recall_at_k_figure(recall.loc[["ircot", "gear"]], tmp_path / "r.png", dataset="d")
    assert out.is_file()


def test_reference_differences_use_the_reports_contrasts(per_q: dict[str, pd.DataFrame]) -> None:
    diffs = reference_differences(per_q, "musique", "evireform-full", n_resamples=500)
    assert set(diffs["reference"]) == {"evireform-full"}
    assert not set(diffs["method"]) & NO_RANKING  # no ranking metrics for iterative methods
    row = diffs[(diffs["method"] == "proprag") & (diffs["metric"] == "Recall@5")].iloc[0]
    pair = {"proprag": per_q["proprag"], "evireform-full": per_q["evireform-full"]}
    expected = paired_contrasts(pair, "musique", [("c", "proprag", "evireform-full")],
                                ["Recall@5"], 500).row(0, named=True)
    assert (row["difference"], row["ci_low"], row["ci_high"]) == (
        expected["difference"], expected["ci_low"], expected["ci_high"])


def test_reference_falls_back_when_the_configured_one_has_no_table(
        per_q: dict[str, pd.DataFrame]) -> None:
    tables = {m: t for m, t in per_q.items() if m != "evireform-full"}
    diffs = reference_differences(tables, "musique", "evireform-full", n_resamples=200)
    assert set(diffs["reference"]) == {FALLBACK_REFERENCE}
    assert reference_differences({"gear": per_q["gear"]}, "x", "evireform-full").empty


def test_paired_difference_figure_one_row_per_dataset(tmp_path: Path, per_q: dict[str, pd.DataFrame],
                                                      captured: list[Figure]) -> None:
    diffs = pd.concat([reference_differences(per_q, ds, "evireform-full", n_resamples=200)
                       for ds in ("demo", "2wiki_s", "musique")], ignore_index=True)
    figures.paired_difference_figure(diffs, tmp_path / "d.png")
    (fig,) = captured
    assert len(fig.axes) == 3 * 2  # datasets x (Recall@5, Chain@5)
    assert [ax.get_title().split(":")[0] for ax in fig.axes[::2]] == ["demo", "2wiki_s", "musique"]
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == fam.ordered(set(METHODS) - NO_RANKING - {"evireform-full"})
    assert len(fig.legends) == 1
    with pytest.raises(ValueError):
        figures.paired_difference_figure(diffs.iloc[0:0], tmp_path / "e.png")


def test_dataset_page_lists_every_method_and_its_contrasts(per_q: dict[str, pd.DataFrame]) -> None:
    metrics = {m: {"n_questions": 40, "Recall@5": 0.5, "Chain@5": 0.25,
                   "retrieval_tokens_per_question": 10.0} for m in METHODS}
    metrics["bm25"].update({"EM": 0.25, "F1": 0.5, "n_qa": 40})
    diffs = reference_differences(per_q, "musique", "evireform-full", n_resamples=200)
    page = dataset_page("musique", metrics, setup="Setup: x.", differences=diffs,
                        sections=[("Paired bootstrap: musique", "BOOT"), ("Empty", "")],
                        figures=[("Recall@K", "figures/recall_at_k-musique.png")])
    ranking, iterative = page.split("## Iterative methods")
    for m in set(METHODS) - NO_RANKING:
        assert f"| {m} |" in ranking
    for m in NO_RANKING:
        assert f"| {m} |" in iterative.split("## Answers")[0]
    assert "| bm25 | **25.00** | **50.00** | 40 |" in page  # EM, F1, n
    assert "## Paired differences against `evireform-full`" in page and "BOOT" in page
    assert "## Empty" not in page
    assert "![Recall@K](../figures/recall_at_k-musique.png)" in page
    table = differences_table(diffs, fam.OURS)
    assert table["method"].to_list() == fam.ordered(table["method"].to_list())
