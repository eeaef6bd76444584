"""DVC stage ``report``: every metrics JSON and per-question table → the reports.

Writes ``reports/README.md`` (main table, decomposition, token cost, paired bootstrap CIs,
figures, links to the per-dataset pages and to the hand-written ``reports/notes.md``),
``reports/datasets/<dataset>.md`` (one page per dataset: every method run there, its
contrasts, its figures), ``reports/retrieval.md`` (one methods × metrics table per dataset),
``reports/plots/recall_at_k.csv`` (a DVC plot) and ``reports/figures/*.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from stages._common import run_stage

if TYPE_CHECKING:
    from evichain.config import Params
    from evichain.report.main_report import Metrics, RawMetrics

app = typer.Typer(add_completion=False)


@app.command()
def main(params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.paths import ReportPaths
        from evichain.report.main_report import read_metric_files

        params = load_params(params_file)
        raw = read_metric_files(ReportPaths().root / "metrics", params.datasets)
        figures = _retrieval_report(params, raw)
        return _main_report(params, raw, figures)

    run_stage("report", body)


def _retrieval_report(p: Params, raw: RawMetrics) -> dict[str, str]:
    """``reports/retrieval.md``, the recall@k plot data and figures; ``raw``: every metrics
    file. Returns dataset → its Recall@K figure (path relative to ``reports/``)."""
    import pandas as pd

    from evichain.io import write_text
    from evichain.paths import ReportPaths
    from evichain.report import retrieval_report as rr
    from evichain.report.families import ranking_methods
    from evichain.report.figures import recall_at_k_figure
    from evichain.report.main_report import retrieval_metrics

    reports = ReportPaths()
    sections, curve, figures = [], [], {}
    for ds in p.datasets:
        metrics = retrieval_metrics(raw.get(ds, {}))
        scored = {m: v for m, v in metrics.items() if v.get("n_questions")}
        figure = None
        if ranking_methods(list(scored)):
            frame = rr.metrics_frame(scored, [f"Recall@{k}" for k in p.evaluate.ks])
            recall_at_k_figure(frame, reports.figure(f"recall_at_k-{ds}"), dataset=ds,
                               ours=p.report.ours)
            figure = figures[ds] = f"figures/recall_at_k-{ds}.png"
        if scored:
            curve += rr.recall_curve_rows(ds, scored)
        sections.append(rr.dataset_section(ds, metrics, _setup(p), figure))
    write_text(rr.build_retrieval_report(sections, _header()), reports.root / "retrieval.md")
    plot = pd.DataFrame(curve, columns=["dataset", "method", "k", "recall"])
    write_text(plot.to_csv(index=False, lineterminator="\n"), reports.plot_data("recall_at_k"))
    return figures


def _main_report(p: Params, raw: RawMetrics, recall_figures: dict[str, str]) -> dict[str, object]:
    """``reports/README.md`` (main, decomposition and cost tables, bootstrap CIs, ablations) and
    one page per dataset, ``reports/datasets/<ds>.md``."""
    import pandas as pd

    from evichain.io import write_text
    from evichain.paths import ReportPaths
    from evichain.report import dataset_pages as dp
    from evichain.report import main_report as mr
    from evichain.report.differences import reference_differences
    from evichain.report.figures import paired_difference_figure
    from evichain.report.medical import medical_metrics, medical_section

    reports = ReportPaths()
    r = p.report
    metrics = {ds: mr.fold_metrics(raw.get(ds, {})) for ds in p.datasets}
    main = mr.main_table(metrics, p.datasets, ["Recall@5", "Recall@10", "F1", "EM"])
    decomposition = mr.main_table(metrics, p.datasets, ["Hit@5", "Recall@5", "Chain@5"])
    cost = mr.cost_table(metrics, p.datasets)
    per_q = {ds: mr.per_question_tables(reports.per_question_root / ds)
             for ds in p.datasets}
    boot_md: list[tuple[str, str]] = []
    by_ds: dict[str, list[tuple[str, str]]] = {}
    ours_parts: list[str] = []
    diffs = []
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
        ranked = mr.without_unranked_recall(per_q[ds])
        if ds not in p.tuning_datasets and len(ranked) > 2:
            diffs.append(reference_differences(per_q[ds], ds, r.reference_method,
                                               n_resamples=r.bootstrap_resamples))
    all_diffs = pd.concat([d for d in diffs if not d.empty], ignore_index=True) if any(
        not d.empty for d in diffs) else pd.DataFrame()
    figures = [recall_figures[ds] for ds in p.datasets if ds in recall_figures]
    if not all_diffs.empty:
        paired_difference_figure(all_diffs, reports.figure("paired_differences"), ours=r.ours)
        figures.append("figures/paired_differences.png")
    sections = [s for ds in p.datasets for s in by_ds[ds][1:-1]]
    ours_body = "\n\n".join(x for x in ours_parts if x)
    if ours_body:
        sections.append(("Variants of ours against the best baseline and their parents",
                         f"{_ours_intro(p)}\n\n{ours_body}"))
    medical = medical_metrics(raw)
    pages, counts = [], mr.question_counts(metrics)
    for ds in p.datasets:
        if not metrics.get(ds):
            continue
        figs = ([(f"Recall@K on {ds}", recall_figures[ds])] if ds in recall_figures else [])
        if not all_diffs.empty and ds in set(all_diffs["dataset"]):
            figs.append(("Paired differences against the reference (one row per dataset)",
                         "figures/paired_differences.png"))
        mine = all_diffs[all_diffs["dataset"] == ds] if not all_diffs.empty else None
        page = dp.dataset_page(ds, metrics[ds], setup=_setup(p), sections=by_ds[ds], differences=mine,
                               figures=figs, ours=r.ours, tuning=ds in p.tuning_datasets,
                               medical=medical_section({ds: medical[ds]}) if ds in medical else "")
        write_text(page, reports.root / dp.page_path(ds))
        pages.append((ds, len(metrics[ds]), counts.get(ds, 0)))
    write_text(mr.render(_setup(p), main, decomposition, cost, boot_md, figures, _not_run(p),
                         sections, counts, _pending(p, metrics),
                         medical_section(medical), pages=dp.pages_index(pages)),
               reports.root / "README.md")
    return {"datasets": len(p.datasets), "methods": len(main), "figures": len(figures),
            "pages": len(pages)}


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
