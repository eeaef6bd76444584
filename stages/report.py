"""DVC stage ``report``: every metrics JSON and per-question table → the reports.

Writes ``reports/README.md`` (main table, decomposition, token cost, paired bootstrap CIs,
figures), ``reports/retrieval.md`` (one methods × metrics table per dataset),
``reports/plots/recall_at_k.csv`` (a DVC plot) and ``reports/figures/*.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from stages._common import run_stage

if TYPE_CHECKING:
    from evichain.config import Params
    from evichain.report.main_report import RawMetrics

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


def _retrieval_report(p: Params, raw: RawMetrics) -> list[str]:
    """``reports/retrieval.md``, the recall@k plot data and figures; ``raw``: every metrics file."""
    import pandas as pd

    from evichain.io import write_text
    from evichain.paths import ReportPaths
    from evichain.report import retrieval_report as rr
    from evichain.report.figures import recall_at_k_figure
    from evichain.report.main_report import retrieval_metrics

    reports = ReportPaths()
    sections, curve, figures = [], [], []
    for ds in p.datasets:
        metrics = retrieval_metrics(raw.get(ds, {}))
        scored = {m: v for m, v in metrics.items() if v.get("n_questions")}
        figure = None
        if scored:
            frame = rr.metrics_frame(scored, [f"Recall@{k}" for k in p.evaluate.ks])
            recall_at_k_figure(frame, reports.figure(f"recall_at_k-{ds}"), dataset=ds)
            figure = f"figures/recall_at_k-{ds}.png"
            figures.append(figure)
            curve += rr.recall_curve_rows(ds, scored)
        sections.append(rr.dataset_section(ds, metrics, _setup(p), figure))
    write_text(rr.build_retrieval_report(sections, _header()), reports.root / "retrieval.md")
    plot = pd.DataFrame(curve, columns=["dataset", "method", "k", "recall"])
    write_text(plot.to_csv(index=False, lineterminator="\n"), reports.plot_data("recall_at_k"))
    return figures


def _main_report(p: Params, raw: RawMetrics, figures: list[str]) -> dict[str, object]:
    """``reports/README.md``: main, decomposition and cost tables, bootstrap CIs, ablations."""
    import pandas as pd

    from evichain.io import write_text
    from evichain.paths import ReportPaths
    from evichain.report import main_report as mr
    from evichain.report.figures import paired_difference_figure
    from evichain.report.medical import medical_metrics, medical_section

    reports = ReportPaths()
    metrics = {ds: mr.fold_metrics(raw.get(ds, {})) for ds in p.datasets}
    main = mr.main_table(metrics, p.datasets, ["Recall@5", "Recall@10", "F1", "EM"])
    decomposition = mr.main_table(metrics, p.datasets, ["Hit@5", "Recall@5", "Chain@5"])
    cost = mr.cost_table(metrics, p.datasets)
    per_q = {ds: mr.per_question_tables(reports.per_question_root / ds)
             for ds in p.datasets}
    boot_md, boots = [], []
    for ds in p.datasets:
        md, boot = mr.bootstrap_section(per_q[ds], ds, p.report.reference_method,
                                        p.report.bootstrap_metrics, p.report.bootstrap_resamples,
                                        evaluated=list(metrics.get(ds, {})))
        boot_md.append((ds, md))
        boots.append(boot)
    all_boot = pd.concat([b for b in boots if not b.empty], ignore_index=True) if any(
        not b.empty for b in boots) else pd.DataFrame()
    if not all_boot.empty and (all_boot["kind"] == "difference").any():
        paired_difference_figure(all_boot, reports.figure("paired_differences"))
        figures = [*figures, "figures/paired_differences.png"]
    sections = mr.method_sections(metrics, per_q, p.datasets,
                                  p.report.bootstrap_resamples)
    sections = [*sections, *_ours_sections(p, per_q)]
    write_text(mr.render(_setup(p), main, decomposition, cost, boot_md, figures, _not_run(p),
                         sections, mr.question_counts(metrics),
                         mr.pending_line(_scheduled(p), metrics),
                         medical_section(medical_metrics(raw))), reports.root / "README.md")
    return {"datasets": len(p.datasets), "methods": len(main), "figures": len(figures)}


def _ours_sections(p: Params, per_q: dict[str, dict[str, object]]) -> list[tuple[str, str]]:
    """The variants of ours against ``report.ours_comparators`` and their parents (issue 38)."""
    from evichain.report.ours import ours_section

    r = p.report
    parts = [ours_section(per_q[ds], ds, r.ours, r.ours_comparators, r.ours_metrics,  # type: ignore[arg-type]
                          r.bootstrap_resamples, tuning=ds in p.tuning_datasets) for ds in p.datasets]
    body = "\n\n".join(x for x in parts if x)
    if not body:
        return []
    tuned = ", ".join(f"`{d}`" for d in p.tuning_datasets) or "no dataset"
    intro = (f"Ours (not in either paper): {', '.join(r.ours)}; EviReform's tuned on "
             f"{tuned} only (reports/tuning/), reported here once. Paired "
             "bootstrap differences (variant − comparator) over the questions both ran on; "
             "\"CI > 0\" = the 95% interval's lower bound is above 0.")
    return [("Variants of ours against the best baseline and their parents", f"{intro}\n\n{body}")]


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
                            (p.baseline_datasets, baselines)):
        for ds in datasets:
            out.setdefault(ds, []).extend(names)
    return out


def _header() -> str:
    return ("# Retrieval results\n\nGenerated by `dvc repro` (stage `report`); do not edit by hand. "
            "Scores are percentages; per dataset the best value of each column is bold and the "
            "second best underlined.")


def _setup(p: Params) -> str:
    bm25 = p.retrieval.bm25
    return (f"Setup: embedder `{p.embed.model}` (L2-normalised, inner product, passages as "
            f"`title\\ntext`); BM25 = bm25s {bm25.method} k1={bm25.k1} b={bm25.b}, "
            f"stemmer={bm25.stemmer}; LLM `{p.llm.model}` (temperature {p.llm.temperature}) "
            f"for the reader on {', '.join(p.llm_datasets)} and for LLM retrieval methods on "
            f"{', '.join(_llm_retrieval_datasets(p))}; reader = EviReform Listing 4 over the "
            f"top {p.read.context_k} passages; 2Wiki/demo means over gold-reliable questions."
            )


def _llm_retrieval_datasets(p: Params) -> list[str]:
    """Datasets on which `dvc repro` runs LLM retrieval methods (EviReform, CEE, baselines)."""
    names = [*p.evireform_datasets, *p.cee_datasets, *p.baseline_datasets]
    return list(dict.fromkeys(names))


if __name__ == "__main__":
    app()
