"""DVC stage ``report``: every metrics JSON and per-question table → the reports.

Writes ``reports/README.md`` (main table, decomposition, token cost, paired bootstrap CIs,
figures), ``reports/retrieval.md`` (one methods × metrics table per dataset),
``reports/plots/recall_at_k.csv`` (a DVC plot) and ``reports/figures/*.png``.
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import run_stage

app = typer.Typer(add_completion=False)


@app.command()
def main(params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params

        params = load_params(params_file)
        figures = _retrieval_report(params)
        return _main_report(params, figures)

    run_stage("report", body)


def _retrieval_report(params: object) -> list[str]:
    import pandas as pd

    from evichain.io import read_json, write_text
    from evichain.paths import ReportPaths
    from evichain.report import retrieval_report as rr
    from evichain.report.figures import recall_at_k_figure

    p = params  # type: ignore[assignment]
    reports = ReportPaths()
    sections, curve, figures = [], [], []
    for ds in p.datasets:  # type: ignore[attr-defined]
        folder = reports.root / "metrics" / ds
        metrics = {f.stem: read_json(f) for f in sorted(folder.glob("*.json"))
                   if not f.stem.startswith(("qa-", "medqa-"))} if folder.exists() else {}
        scored = {m: v for m, v in metrics.items() if v.get("n_questions")}
        figure = None
        if scored:
            frame = rr.metrics_frame(scored, [f"Recall@{k}" for k in p.evaluate.ks])  # type: ignore[attr-defined]
            recall_at_k_figure(frame, reports.figure(f"recall_at_k-{ds}"), dataset=ds)
            figure = f"figures/recall_at_k-{ds}.png"
            figures.append(figure)
            curve += rr.recall_curve_rows(ds, scored)
        sections.append(rr.dataset_section(ds, metrics, _setup(p), figure))
    write_text(rr.build_retrieval_report(sections, _header()), reports.root / "retrieval.md")
    plot = pd.DataFrame(curve, columns=["dataset", "method", "k", "recall"])
    write_text(plot.to_csv(index=False, lineterminator="\n"), reports.plot_data("recall_at_k"))
    return figures


def _main_report(params: object, figures: list[str]) -> dict[str, object]:
    import pandas as pd

    from evichain.io import write_text
    from evichain.paths import ReportPaths
    from evichain.report import main_report as mr
    from evichain.report.figures import paired_difference_figure

    p = params  # type: ignore[assignment]
    reports = ReportPaths()
    metrics = mr.load_metrics(reports.root / "metrics", p.datasets)  # type: ignore[attr-defined]
    main = mr.main_table(metrics, p.datasets, ["Recall@5", "Recall@10", "F1", "EM"])  # type: ignore[attr-defined]
    decomposition = mr.main_table(metrics, p.datasets, ["Hit@5", "Recall@5", "Chain@5"])  # type: ignore[attr-defined]
    cost = mr.cost_table(metrics, p.datasets)  # type: ignore[attr-defined]
    per_q = {ds: mr.per_question_tables(reports.per_question_root / ds)
             for ds in p.datasets}  # type: ignore[attr-defined]
    boot_md, boots = [], []
    for ds in p.datasets:  # type: ignore[attr-defined]
        md, boot = mr.bootstrap_section(per_q[ds], ds, p.report.reference_method,  # type: ignore[attr-defined]
                                        p.report.bootstrap_metrics, p.report.bootstrap_resamples,  # type: ignore[attr-defined]
                                        evaluated=list(metrics.get(ds, {})))
        boot_md.append((ds, md))
        boots.append(boot)
    all_boot = pd.concat([b for b in boots if not b.empty], ignore_index=True) if any(
        not b.empty for b in boots) else pd.DataFrame()
    if not all_boot.empty and (all_boot["kind"] == "difference").any():
        paired_difference_figure(all_boot, reports.figure("paired_differences"))
        figures = [*figures, "figures/paired_differences.png"]
    sections = mr.method_sections(metrics, per_q, p.datasets,  # type: ignore[attr-defined]
                                  p.report.bootstrap_resamples)  # type: ignore[attr-defined]
    write_text(mr.render(_setup(p), main, decomposition, cost, boot_md, figures, _not_run(p),
                         sections, mr.question_counts(metrics),
                         mr.pending_line(_scheduled(p), metrics)), reports.root / "README.md")
    return {"datasets": len(p.datasets), "methods": len(main), "figures": len(figures)}  # type: ignore[attr-defined]


def _not_run(params: object) -> list[str]:
    """Methods of the papers that cannot run here, said instead of given a number."""
    from evichain.methods.rerank.cross_encoder import offline_weights_available

    model = params.rerank.cross_encoder.model  # type: ignore[attr-defined]
    if offline_weights_available(model):
        return []
    return [f"`cross_encoder` (`{model}`, rerank over the dense top "
            f"{params.rerank.pool_size}): no offline weights"]  # type: ignore[attr-defined]


def _scheduled(params: object) -> dict[str, list[str]]:
    """dataset → the retrieval methods ``dvc.yaml``'s stage matrices run there, named as their
    metrics files (``reports/metrics/<ds>/<name>.json``)."""
    from evichain.methods.rerank.params import run_name

    p = params  # type: ignore[assignment]
    out: dict[str, list[str]] = {ds: list(p.retrieval_methods) for ds in p.datasets}  # type: ignore[attr-defined]
    baselines = [*map(run_name, p.rerank.methods), *p.expansion.methods,  # type: ignore[attr-defined]
                 *p.iterative.methods, *p.graph.methods]  # type: ignore[attr-defined]
    for datasets, names in ((p.evireform_datasets, [f"evireform-{v}" for v in p.evireform_variants]),  # type: ignore[attr-defined]
                            (p.cee_datasets, [f"cee-{v}" for v in p.cee_variants]),  # type: ignore[attr-defined]
                            (p.baseline_datasets, baselines)):  # type: ignore[attr-defined]
        for ds in datasets:
            out.setdefault(ds, []).extend(names)
    return out


def _header() -> str:
    return ("# Retrieval results\n\nGenerated by `dvc repro` (stage `report`); do not edit by hand. "
            "Scores are percentages; per dataset the best value of each column is bold and the "
            "second best underlined.")


def _setup(params: object) -> str:
    p = params  # type: ignore[assignment]
    bm25 = p.retrieval.bm25  # type: ignore[attr-defined]
    return (f"Setup: embedder `{p.embed.model}` (L2-normalised, inner product, passages as "  # type: ignore[attr-defined]
            f"`title\\ntext`); BM25 = bm25s {bm25.method} k1={bm25.k1} b={bm25.b}, "
            f"stemmer={bm25.stemmer}; LLM `{p.llm.model}` (temperature {p.llm.temperature}) "  # type: ignore[attr-defined]
            f"for the reader on {', '.join(p.llm_datasets)} and for LLM retrieval methods on "  # type: ignore[attr-defined]
            f"{', '.join(_llm_retrieval_datasets(p))}; reader = EviReform Listing 4 over the "
            f"top {p.read.context_k} passages; 2Wiki/demo means over gold-reliable questions."  # type: ignore[attr-defined]
            )


def _llm_retrieval_datasets(params: object) -> list[str]:
    """Datasets on which `dvc repro` runs LLM retrieval methods (EviReform, CEE, baselines)."""
    p = params  # type: ignore[assignment]
    names = [*p.evireform_datasets, *p.cee_datasets, *p.baseline_datasets]  # type: ignore[attr-defined]
    return list(dict.fromkeys(names))


if __name__ == "__main__":
    app()
