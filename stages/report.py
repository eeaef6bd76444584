"""DVC stage ``report``: every metrics JSON and per-question table → the reports.

Writes ``reports/README.md`` (main table, decomposition, token cost, paired bootstrap CIs,
figures, index statistics, links to the per-dataset pages and to the hand-written
``reports/notes.md``), ``reports/datasets/<dataset>.md`` (one page per dataset: every method run
there, its contrasts, its figures, its index statistics), ``reports/retrieval.md`` (one methods
× metrics table per dataset), ``reports/plots/recall_at_k.csv`` (a DVC plot) and
``reports/figures/*.png``. Reads ``reports/metrics``, ``reports/eval`` and
``reports/index_stats``; never ``artifacts/``. No figure is drawn on fewer than
:data:`~evichain.report.figures.MIN_FIGURE_QUESTIONS` questions: a figure this run does not
draw is deleted, and the pages say why it is absent.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from stages._common import run_stage

if TYPE_CHECKING:
    import polars as pl

    from evichain.config import Params
    from evichain.report.main_report import Metrics, RawMetrics

app = typer.Typer(add_completion=False)


@app.command()
def main(params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.paths import ReportPaths
        from evichain.report import main_report as mr
        from evichain.report.differences import strongest_baseline
        from evichain.report.index_stats import read_index_stats

        params = load_params(params_file)
        reports = ReportPaths()
        raw = mr.read_metric_files(reports.root / "metrics", params.datasets)
        per_q = {ds: mr.per_question_tables(reports.per_question_root / ds) for ds in params.datasets}
        baselines = {ds: strongest_baseline(per_q[ds], params.report.ours) for ds in params.datasets}
        stats = read_index_stats(reports.index_stats, params.datasets)
        figures, notes = _retrieval_report(params, raw, baselines)
        return _main_report(params, raw, per_q, figures, notes, stats)

    run_stage("report", body)


def _retrieval_report(p: Params, raw: RawMetrics, baselines: dict[str, str | None]
                      ) -> tuple[dict[str, str], dict[str, list[str]]]:
    """``reports/retrieval.md``, the recall@k plot data and figures; ``raw``: every metrics
    file; ``baselines``: dataset → its strongest baseline (a grey line in every panel). Returns
    dataset → its Recall@K figure (path relative to ``reports/``) and dataset → why a figure
    or a method is not drawn (:func:`_recall_figure`)."""
    import polars as pl

    from evichain.io import write_text
    from evichain.paths import ReportPaths
    from evichain.report import retrieval_report as rr
    from evichain.report.main_report import ranking_note, retrieval_metrics

    reports = ReportPaths()
    sections, curve, figures, notes = [], [], {}, {}
    for ds in p.datasets:
        metrics = retrieval_metrics(raw.get(ds, {}))
        scored = {m: v for m, v in metrics.items() if v.get("n_questions")}
        figure, notes[ds] = _recall_figure(p, ds, scored, baselines.get(ds))
        if figure:
            figures[ds] = figure
        if scored:
            curve += rr.recall_curve_rows(ds, scored)
        gear = [ranking_note(p.iterative.gear.run_order)] if "gear" in scored else []
        sections.append(rr.dataset_section(ds, metrics, _setup(p), figure, [*gear, *notes[ds]]))
    write_text(rr.build_retrieval_report(sections, _header()), reports.root / "retrieval.md")
    plot = pl.DataFrame(curve, schema={"dataset": pl.String, "method": pl.String, "k": pl.Int64,
                                       "recall": pl.Float64})
    write_text(plot.write_csv(), reports.plot_data("recall_at_k"))
    return figures, notes


def _recall_figure(p: Params, ds: str, scored: dict[str, dict[str, object]], baseline: str | None
                   ) -> tuple[str | None, list[str]]:
    """Draw ``recall_at_k-<ds>.png`` over the ranking methods evaluated on at least
    :data:`~evichain.report.figures.MIN_FIGURE_QUESTIONS` questions, or delete a stale one when
    none is. Returns the figure (path relative to ``reports/``, None if not drawn) and the
    sentences saying what is not drawn and why."""
    from evichain.paths import ReportPaths
    from evichain.report import retrieval_report as rr
    from evichain.report.families import ranking_methods
    from evichain.report.figures import MIN_FIGURE_QUESTIONS, drawable_methods, recall_at_k_figure

    path = ReportPaths().figure(f"recall_at_k-{ds}")
    ranked = ranking_methods(list(scored))
    if not ranked:
        return None, []
    n = {m: int(scored[m]["n_questions"]) for m in ranked}  # type: ignore[call-overload]
    drawn = drawable_methods(n, MIN_FIGURE_QUESTIONS)
    if not drawn:
        path.unlink(missing_ok=True)
        return None, [f"No Recall@K figure for `{ds}`: its methods were evaluated on n = "
                      f"{max(n.values())} questions, fewer than the {MIN_FIGURE_QUESTIONS} a published "
                      "figure needs (the curves would be steps of whole questions); its retrieval "
                      "table has the values."]
    frame = rr.metrics_frame({m: scored[m] for m in drawn}, [f"Recall@{k}" for k in p.evaluate.ks])
    recall_at_k_figure(frame, path, dataset=ds, n_questions={m: n[m] for m in drawn},
                       ours=p.report.ours, reference=baseline if baseline in drawn else None)
    left = sorted(set(ranked) - set(drawn))
    return f"figures/recall_at_k-{ds}.png", ([
        f"Left out of the Recall@K figure of `{ds}` (fewer than {MIN_FIGURE_QUESTIONS} questions): "
        f"{', '.join(f'`{m}` (n = {n[m]})' for m in left)}."] if left else [])


def _main_report(p: Params, raw: RawMetrics, per_q: dict[str, dict[str, pl.DataFrame]],
                 recall_figures: dict[str, str], recall_notes: dict[str, list[str]],
                 stats: dict[str, dict[str, dict[str, object]]]) -> dict[str, object]:
    """``reports/README.md`` (main, decomposition and cost tables, bootstrap CIs, ablations,
    figures, index statistics) and one page per dataset, ``reports/datasets/<ds>.md``."""
    from evichain.io import write_text
    from evichain.paths import ReportPaths
    from evichain.report import dataset_pages as dp
    from evichain.report import main_report as mr
    from evichain.report.differences import REFERENCE_RULE
    from evichain.report.figures import MIN_FIGURE_QUESTIONS
    from evichain.report.index_stats import index_stats_section
    from evichain.report.medical import medical_metrics, medical_section

    reports = ReportPaths()
    r = p.report
    metrics = {ds: mr.fold_metrics(raw.get(ds, {})) for ds in p.datasets}
    main = mr.main_table(metrics, p.datasets, ["Recall@5", "Recall@10", "F1", "EM"])
    decomposition = mr.main_table(metrics, p.datasets, ["Hit@5", "Recall@5", "Chain@5"])
    cost = mr.cost_table(metrics, p.datasets)
    boot_md: list[tuple[str, str]] = []
    by_ds: dict[str, list[tuple[str, str]]] = {}
    ours_parts: list[str] = []
    for ds in p.datasets:
        md, _ = mr.bootstrap_section(per_q[ds], ds, r.reference_method, r.bootstrap_metrics,
                                     r.bootstrap_resamples, evaluated=list(metrics.get(ds, {})))
        boot_md.append((ds, md))
        by_ds[ds] = [(f"Paired bootstrap: {ds}", md),
                     *mr.method_sections(metrics, per_q, [ds], r.bootstrap_resamples)]
        ours = _ours_section(p, ds, per_q[ds])
        ours_parts.append(ours)
        by_ds[ds].append(("Variants of ours against the best baseline and their parents",
                          f"{_ours_intro(p)}\n\n{ours}" if ours else ""))
    diffs, drawn, diff_notes = _paired_differences(p, per_q)
    figures = [recall_figures[ds] for ds in p.datasets if ds in recall_figures]
    if drawn:
        figures.append("figures/paired_differences.png")
    sections = [s for ds in p.datasets for s in by_ds[ds][1:-1]]
    ours_body = "\n\n".join(x for x in ours_parts if x)
    if ours_body:
        sections.append(("Variants of ours against the best baseline and their parents",
                         f"{_ours_intro(p)}\n\n{ours_body}"))
    medical = medical_metrics(raw)
    notes = {ds: [*recall_notes.get(ds, []), *diff_notes.get(ds, [])] for ds in p.datasets}
    ranking = mr.ranking_note(p.iterative.gear.run_order)
    pages, counts = [], mr.question_counts(metrics)
    for ds in p.datasets:
        if not metrics.get(ds):
            continue
        figs = ([(f"Recall@K on {ds}, one panel per method family", recall_figures[ds])]
                if ds in recall_figures else [])
        if ds in drawn:
            figs.append(("Paired differences against each dataset's strongest baseline (one row "
                         f"per dataset with n ≥ {MIN_FIGURE_QUESTIONS})", "figures/paired_differences.png"))
        has_gear = metrics[ds].get("gear", {}).get("n_questions")
        page = dp.dataset_page(ds, metrics[ds], setup=_setup(p), sections=by_ds[ds],
                               differences=diffs.get(ds), figures=figs, ours=r.ours,
                               tuning=ds in p.tuning_datasets,
                               medical=medical_section({ds: medical[ds]}) if ds in medical else "",
                               reference_rule=REFERENCE_RULE, differences_drawn=ds in drawn,
                               ranking_notes=[ranking] if has_gear else [], figure_notes=notes[ds],
                               index_stats=index_stats_section({ds: stats[ds]}) if ds in stats else "")
        write_text(page, reports.root / dp.page_path(ds))
        pages.append((ds, len(metrics[ds]), counts.get(ds, 0)))
    gear_any = any(metrics[ds].get("gear", {}).get("n_questions") for ds in p.datasets)
    write_text(mr.render(_setup(p), main, decomposition, cost, boot_md, figures, _not_run(p),
                         sections, counts, _pending(p, metrics),
                         medical_section(medical), pages=dp.pages_index(pages),
                         ranking=ranking if gear_any else "",
                         figure_notes=[x for ds in p.datasets for x in notes[ds]],
                         index_stats=index_stats_section(stats)),
               reports.root / "README.md")
    write_text(figures_index(figures, [x for ds in p.datasets for x in notes[ds]]),
               reports.root / "figures" / "README.md")
    return {"datasets": len(p.datasets), "methods": main.height, "figures": len(figures),
            "pages": len(pages), "paired_difference_datasets": len(drawn)}


def figures_index(figures: list[str], not_drawn: list[str]) -> str:
    """``reports/figures/README.md``: every figure this run drew, and what it did not draw and
    why (the folder is the stage's output, so it exists even when no figure is drawn)."""
    drawn = [f"- [`{Path(f).name}`]({Path(f).name})" for f in figures] or ["- none"]
    return "\n".join(["# Figures", "", "Drawn by the `report` stage from the committed metrics.", "",
                      *drawn, "", *([f"- {note}" for note in not_drawn] or [])]).rstrip() + "\n"


def _paired_differences(p: Params, per_q: dict[str, dict[str, pl.DataFrame]]
                        ) -> tuple[dict[str, pl.DataFrame], set[str], dict[str, list[str]]]:
    """Paired differences against each reported dataset's strongest baseline (tuning samples
    and datasets with fewer than three ranking tables left out) and
    ``reports/figures/paired_differences.png`` over the rows with n ≥
    :data:`~evichain.report.figures.MIN_FIGURE_QUESTIONS` (deleted when none is). Returns
    dataset → its rows, the datasets drawn, dataset → why rows are not drawn."""
    import polars as pl

    from evichain.paths import ReportPaths
    from evichain.report.differences import PRIMARY_METRIC, baseline_differences, drawable
    from evichain.report.figures import MIN_FIGURE_QUESTIONS, paired_difference_figure
    from evichain.report.main_report import without_unranked_recall

    r = p.report
    diffs: dict[str, pl.DataFrame] = {}
    for ds in p.datasets:
        if ds in p.tuning_datasets or len(without_unranked_recall(per_q[ds])) <= 2:
            continue
        rows = baseline_differences(per_q[ds], ds, r.ours, n_resamples=r.bootstrap_resamples)
        if rows.height:
            diffs[ds] = rows
    kept = {ds: drawable(rows, MIN_FIGURE_QUESTIONS) for ds, rows in diffs.items()}
    notes: dict[str, list[str]] = {}
    for ds, rows in diffs.items():
        if kept[ds].height == 0:
            notes[ds] = [f"`{ds}` is not in the paired-differences figure: its comparisons rest on n = "
                         f"{rows['n'].max()} questions, fewer than {MIN_FIGURE_QUESTIONS} (the intervals "
                         f"would be steps of whole questions); the paired-differences table of the `{ds}` "
                         "page has them."]
        elif left := sorted(set(rows["method"]) - set(kept[ds]["method"])):
            notes[ds] = [f"Left out of the paired-differences row of `{ds}` (fewer than "
                         f"{MIN_FIGURE_QUESTIONS} paired questions): {', '.join(f'`{m}`' for m in left)}."]
    path = ReportPaths().figure("paired_differences")
    shown = [kept[ds] for ds in p.datasets if ds in kept and kept[ds].height]
    if shown:
        paired_difference_figure(pl.concat(shown, how="vertical"), path, ours=r.ours,
                                 title=f"Method − the strongest baseline of each dataset (highest mean "
                                       f"{PRIMARY_METRIC} among methods not EviReform, CEE or ours)")
    else:
        path.unlink(missing_ok=True)
    return diffs, {ds for ds, rows in kept.items() if rows.height}, notes


def _ours_section(p: Params, ds: str, per_q: dict[str, object]) -> str:
    """The variants of ours on ``ds`` against ``report.ours_comparators`` and their parents
    (issue 38); '' when none has a per-question table there."""
    from evichain.report.ours import ours_section

    r = p.report
    return ours_section(per_q, ds, r.ours, r.ours_comparators, r.ours_metrics,  # type: ignore[arg-type]
                        r.bootstrap_resamples, tuning=ds in p.tuning_datasets)


def _ours_intro(p: Params) -> str:
    r = p.report
    tuned = ", ".join(f"`{d}`" for d in p.tuning_datasets) or "no dataset"
    return (f"Ours (not in either paper): {', '.join(r.ours)}; their values (EviReform's "
            f"grids, CEE's γ, the fusion weights) tuned on {tuned} only (reports/tuning/), "
            f"reported here once. Paired "
            "bootstrap differences (variant − comparator) over the questions both ran on; "
            "\"CI > 0\" = the 95% interval's lower bound is above 0.")


def _not_run(p: Params) -> list[str]:
    """Methods of the papers that cannot run here, said instead of given a number."""
    from evichain.methods.rerank.cross_encoder import offline_weights_available

    model = p.rerank.cross_encoder.model
    if offline_weights_available(model):
        return []
    return [f"`cross_encoder` (`{model}`, rerank over the dense top "
            f"{p.rerank.pool_size}): no offline weights"]


def _scheduled(p: Params) -> dict[str, list[str]]:
    """dataset → the retrieval methods ``dvc.yaml``'s stage matrices run there, named as their
    metrics files (``reports/metrics/<ds>/<name>.json``)."""
    from evichain.methods.rerank.params import run_name

    out: dict[str, list[str]] = {ds: list(p.retrieval_methods) for ds in p.datasets}
    baselines = [*map(run_name, p.rerank.methods), *p.expansion.methods,
                 *p.iterative.methods, *p.graph.methods]
    for datasets, names in ((p.evireform_datasets, [f"evireform-{v}" for v in p.evireform_variants]),
                            (p.cee_datasets, [f"cee-{v}" for v in p.cee_variants]),
                            (p.baseline_datasets, baselines),
                            (p.fusion_datasets, [p.fusion.name])):
        for ds in datasets:
            out.setdefault(ds, []).extend(names)
    return out


def _scheduled_answers(p: Params) -> dict[str, list[str]]:
    """dataset → the methods whose answers ``dvc.yaml``'s reader stages produce there: ``read``
    and ``read_direct`` (llm_datasets × reader_methods), ``read_qa`` / ``read_direct_qa``
    (qa_datasets × direct + qa_methods), ``read_iterative`` (baseline_datasets × iterative)."""
    out: dict[str, list[str]] = {ds: list(p.reader_methods) for ds in p.llm_datasets}
    for ds in p.qa_datasets:
        out.setdefault(ds, []).extend(["direct", *p.qa_methods])
    for ds in p.baseline_datasets:
        out.setdefault(ds, []).extend(p.iterative.methods)
    return out


def _pending(p: Params, metrics: Metrics) -> str:
    """The report's pending lines: ranking runs, then answers, not yet made here."""
    from evichain.report import main_report as mr

    lines = [mr.pending_line(_scheduled(p), metrics), mr.pending_answers_line(_scheduled_answers(p), metrics)]
    return "\n\n".join(x for x in lines if x)


def _header() -> str:
    return ("# Retrieval results\n\nGenerated by `dvc repro` (stage `report`); do not edit by hand. "
            "Scores are percentages; per dataset the best value of each column is bold and the "
            "second best underlined.")


def _setup(p: Params) -> str:
    bm25 = p.retrieval.bm25
    readers = ", ".join(dict.fromkeys([*p.llm_datasets, *p.qa_datasets]))
    return (f"Setup: embedder `{p.embed.model}` (L2-normalised, inner product, passages as "
            f"`title\\ntext`); BM25 = bm25s {bm25.method} k1={bm25.k1} b={bm25.b}, "
            f"stemmer={bm25.stemmer}; LLM `{p.llm.model}` (temperature {p.llm.temperature}) "
            f"for the reader on {readers} and for LLM retrieval methods on "
            f"{', '.join(_llm_retrieval_datasets(p))}; reader = EviReform Listing 4 over the "
            f"top {p.read.context_k} passages; 2Wiki/demo means over gold-reliable questions."
            )


def _llm_retrieval_datasets(p: Params) -> list[str]:
    """Datasets on which `dvc repro` runs LLM retrieval methods (EviReform, CEE, baselines)."""
    names = [*p.evireform_datasets, *p.cee_datasets, *p.baseline_datasets]
    return list(dict.fromkeys(names))


if __name__ == "__main__":
    app()
