"""The report's figures and per-dataset pages from fixture metrics: one Recall@K panel per method
family with n in every title, methods without a passage ranking left out (GeAR drawn), paired
differences against the strongest baseline computed by the report's contrast code, and no
figure on fewer than MIN_FIGURE_QUESTIONS questions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from matplotlib.figure import Figure

import evichain.report.figures as figures
from evichain.report import families as fam
from evichain.report.ablations import paired_contrasts
from evichain.report.dataset_pages import dataset_page, differences_table
from evichain.report.differences import REFERENCE_RULE, baseline_differences, difference_frame, drawable
from evichain.report.main_report import NO_RANKING

METHODS = ["bm25", "dense", "rerank-listwise", "hyde", "lamer", "hipporag2", "proprag",
           "evireform-base", "evireform-full", "cee-full", "cee-no_sequential",
           "evireform-robust", "ircot", "self_ask", "s2g_rag", "gear"]
N = 40


@pytest.fixture
def recall() -> pl.DataFrame:
    """Recall@K fractions of every fixture method (iterative ones included, as the stage has)."""
    rng = np.random.default_rng(1)
    values = np.sort(rng.random((len(METHODS), 5)), axis=1)
    return pl.DataFrame({"method": METHODS, **{f"Recall@{k}": values[:, i]
                                               for i, k in enumerate((1, 2, 5, 10, 20))}})


@pytest.fixture
def per_q() -> dict[str, pl.DataFrame]:
    rng = np.random.default_rng(2)
    qids = [f"q{i}" for i in range(N)]
    return {m: pl.DataFrame({"question_id": qids, "Recall@5": rng.random(N),
                             "Chain@5": rng.binomial(1, 0.4, N).astype(float)})
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


def _n(methods: list[str] | pl.Series, n: int = N) -> dict[str, int]:
    return {str(m): n for m in methods}


def test_only_gear_of_the_iterative_methods_is_ranked() -> None:
    assert fam.UNRANKED == NO_RANKING == fam.ITERATIVE - {"gear"}
    assert all(fam.family(m) == "iterative" for m in fam.ITERATIVE)
    assert fam.ranking_methods(["ircot", "gear", "self_ask", "s2g_rag", "bm25"]) == ["gear", "bm25"]


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


def test_recall_figure_has_one_panel_per_family_with_n_in_every_title(
        tmp_path: Path, recall: pl.DataFrame, captured: list[Figure]) -> None:
    n = {**_n(recall["method"]), "proprag": 35}
    path = figures.recall_at_k_figure(recall, tmp_path / "r.png", dataset="2wiki_s", n_questions=n,
                                      reference="proprag")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (fig,) = captured
    panels = [ax for ax in fig.axes if ax.axison]
    groups = list(dict.fromkeys(fam.family(m) for m in fam.ordered(fam.ranking_methods(METHODS))))
    assert len(panels) == len(groups) == 8
    for ax, group in zip(panels, groups, strict=True):
        lines = [str(line.get_label()) for line in ax.get_lines()]
        members = [m for m in fam.ordered(fam.ranking_methods(METHODS)) if fam.family(m) == group]
        reference = [] if group == "graph" else ["proprag (strongest baseline)"]
        assert lines == reference + members  # the strongest baseline repeated in grey elsewhere
        expected = "n = 35–40" if group == "graph" else f"n = {N}"
        assert ax.get_title() == f"{fam.LABEL[group]} ({expected})"
        assert ax.get_legend() is not None
    assert max(len(ax.get_lines()) for ax in panels) <= 7  # never 22-27 lines in one panel
    drawn = {str(line.get_label()) for ax in panels for line in ax.get_lines()}
    assert "gear" in drawn and not drawn & NO_RANKING
    assert fig.get_suptitle() == "Recall@K on 2wiki_s (n = 35–40), one panel per method family"


def test_recall_figure_refuses_methods_on_too_few_questions(tmp_path: Path, recall: pl.DataFrame) -> None:
    few = {**_n(recall["method"]), "bm25": figures.MIN_FIGURE_QUESTIONS - 1}
    with pytest.raises(ValueError, match="bm25 on demo: fewer than 30 questions"):
        figures.recall_at_k_figure(recall, tmp_path / "r.png", dataset="demo", n_questions=few)
    assert not (tmp_path / "r.png").exists()
    assert figures.drawable_methods({"a": 4, "b": 30, "c": 100}) == ["b", "c"]
    with pytest.raises(ValueError, match="no ranking method"):
        figures.recall_at_k_figure(recall.filter(pl.col("method").is_in(["ircot", "s2g_rag"])),
                                   tmp_path / "r.png", dataset="d", n_questions=_n(recall["method"]))


def test_only_gear_of_the_iterative_methods_draws(tmp_path: Path, recall: pl.DataFrame,
                                                  captured: list[Figure]) -> None:
    figures.recall_at_k_figure(recall.filter(pl.col("method").is_in(["ircot", "gear"])), tmp_path / "r.png",
                               dataset="d", n_questions=_n(recall["method"]))
    (fig,) = captured
    (ax,) = [a for a in fig.axes if a.axison]
    assert [line.get_label() for line in ax.get_lines()] == ["gear"]


def test_reference_differences_use_the_reports_contrasts(per_q: dict[str, pl.DataFrame]) -> None:
    diffs = difference_frame(per_q, "musique", "proprag", n_resamples=500)
    assert set(diffs["reference"]) == {"proprag"}
    assert not set(diffs["method"]) & NO_RANKING  # no ranking metrics for IRCoT, Self-Ask, S2G-RAG
    assert "gear" in set(diffs["method"])
    row = diffs.filter((pl.col("method") == "evireform-full") & (pl.col("metric") == "Recall@5")).row(
        0, named=True)
    pair = {"evireform-full": per_q["evireform-full"], "proprag": per_q["proprag"]}
    expected = paired_contrasts(pair, "musique", [("c", "evireform-full", "proprag")],
                                ["Recall@5"], 500).row(0, named=True)
    assert (row["difference"], row["ci_low"], row["ci_high"]) == (
        expected["difference"], expected["ci_low"], expected["ci_high"])


def test_a_reference_without_a_table_is_an_error(per_q: dict[str, pl.DataFrame]) -> None:
    with pytest.raises(ValueError, match="reference 'nope' has no per-question ranking table"):
        difference_frame(per_q, "musique", "nope")
    assert baseline_differences({"ircot": per_q["ircot"]}, "x").height == 0  # no baseline ranks


def _datasets_diffs(per_q: dict[str, pl.DataFrame], sizes: dict[str, int]) -> pl.DataFrame:
    """Differences against the strongest baseline on datasets of ``sizes`` questions."""
    return pl.concat([baseline_differences({m: t.head(n) for m, t in per_q.items()}, ds, n_resamples=200)
                      for ds, n in sizes.items()])


def test_paired_difference_figure_draws_only_datasets_with_enough_questions(
        tmp_path: Path, per_q: dict[str, pl.DataFrame], captured: list[Figure]) -> None:
    diffs = _datasets_diffs(per_q, {"demo": 4, "2wiki_s": N, "musique": N - 5})
    with pytest.raises(ValueError, match=r"fewer than 30 questions: \['demo'\]"):
        figures.paired_difference_figure(diffs, tmp_path / "d.png")
    kept = drawable(diffs, figures.MIN_FIGURE_QUESTIONS)
    assert set(kept["dataset"]) == {"2wiki_s", "musique"} and kept["n"].min() >= 30
    figures.paired_difference_figure(kept, tmp_path / "d.png", title="against the strongest baseline")
    (fig,) = captured
    assert fig.get_suptitle() == "against the strongest baseline"
    assert len(fig.axes) == 2 * 2  # datasets x (Recall@5, Chain@5)
    titles = [ax.get_title() for ax in fig.axes]
    assert [t.split(":")[0] for t in titles[::2]] == ["2wiki_s", "musique"]
    references = {ds: str(kept.filter(pl.col("dataset") == ds)["reference"][0])
                  for ds in ("2wiki_s", "musique")}
    assert titles[0] == f"2wiki_s: Recall@5, method − {references['2wiki_s']} (n = {N})"
    assert titles[3] == f"musique: Chain@5, method − {references['musique']} (n = {N - 5})"
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == fam.ordered(set(METHODS) - NO_RANKING - {references["2wiki_s"]})
    assert len(fig.legends) == 1
    with pytest.raises(ValueError):
        figures.paired_difference_figure(kept.head(0), tmp_path / "e.png")


def test_dataset_page_lists_every_method_and_its_contrasts(per_q: dict[str, pl.DataFrame]) -> None:
    metrics = {m: {"n_questions": N, "Recall@5": 0.5, "Chain@5": 0.25,
                   "retrieval_tokens_per_question": 10.0} for m in METHODS}
    metrics["bm25"].update({"EM": 0.25, "F1": 0.5, "n_qa": N})
    diffs = baseline_differences(per_q, "musique", n_resamples=200)
    ref = str(diffs["reference"][0])
    page = dataset_page("musique", metrics, setup="Setup: x.", differences=diffs,
                        sections=[("Paired bootstrap: musique", "BOOT"), ("Empty", "")],
                        figures=[("Recall@K", "figures/recall_at_k-musique.png")],
                        reference_rule=REFERENCE_RULE, differences_drawn=True,
                        ranking_notes=["GEAR NOTE"], figure_notes=["WHY NOT DRAWN"],
                        index_stats="## Index statistics\n\nSTATS\n")
    ranking, iterative = page.split("## Iterative methods")
    for m in set(METHODS) - NO_RANKING:
        assert f"| {m} |" in ranking
    for m in NO_RANKING:
        assert f"| {m} |" in iterative.split("## Answers")[0]
    assert "GEAR NOTE" in ranking and "| gear | iterative / agentic |" in ranking
    assert "| bm25 | **25.00** | **50.00** | 40 |" in page  # EM, F1, n
    assert f"## Paired differences against the strongest baseline `{ref}`" in page
    assert f"Strongest baseline: {REFERENCE_RULE}." in page
    assert "Drawn in the paired-differences figure." in page
    assert "BOOT" in page and "## Empty" not in page
    assert "![Recall@K](../figures/recall_at_k-musique.png)" in page
    assert page.index("WHY NOT DRAWN") < page.index("STATS") < page.index("## Metric definitions")
    table = differences_table(diffs, fam.OURS)
    assert table["method"].to_list() == fam.ordered(table["method"].to_list())
    assert set(table["n"]) == {str(N)}
