"""DVC stage ``sweep_evireform@<dataset>``: EviReform's one-at-a-time sweep of α, β, k_r and L
(paper §A.6, Fig. A.2, Tables A.8–A.10) on a dataset of ``evireform.sweep.datasets``.

Reads the dataset's index and questions and runs :func:`flows.sweep.run_sweep`. α, β and k_r
replay the default's LLM answers (``full``'s, recorded by ``retrieve_evireform``) with 0 model
calls, or the stage fails; L's other values need new reformulation calls and run only when
``evireform.sweep.swept`` lists ``max_residual_queries`` (the JSON and the figure give the calls
they need otherwise).

Writes ``reports/sweeps/<dataset>/evireform.parquet`` (one row per question × configuration:
config columns, per-question metrics, ranking), ``reports/sweeps/<dataset>/evireform.json``
(n, and per configuration its LLM usage and, per metric of ``evireform.sweep.metrics``, the
mean, 95% bootstrap CI and paired difference against the default) and
``reports/sweeps/<dataset>/evireform.png`` (Fig. A.2's line panels; not under
``reports/figures``, which the ``report`` stage owns as one output folder). On 2Wiki the
statistics cover the gold-reliable questions when ``evaluate.twowiki_reliable_only`` is true,
as ``evaluate`` does. The questions whose default run had a failed LLM step (e.g. a prompt the
recording lacks: the same fallback in every configuration) are listed in the JSON and counted in
the figure's title. Fails (after writing) above ``llm.max_failure_rate`` of failed requests or of
such questions.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from stages._common import check_failure_rate, run_stage

if TYPE_CHECKING:
    import polars as pl

    from evichain.config import Params

app = typer.Typer(add_completion=False)

SWEEP_DIR = Path("reports/sweeps")


def sweep_files(dataset: str) -> tuple[Path, Path, Path]:
    """(per-question parquet, JSON, figure) of ``dataset``'s sweep."""
    folder = SWEEP_DIR / dataset
    return folder / "evireform.parquet", folder / "evireform.json", folder / "evireform.png"


def write_table(table: pl.DataFrame, path: Path) -> Path:
    """``table`` as Parquet, atomically and byte-deterministically (as
    :func:`evichain.io.write_parquet`, but from polars: nulls stay null, lists stay lists)."""
    import pyarrow.parquet as pq

    from evichain.io import atomic_path

    arrow = table.to_arrow()
    with atomic_path(path) as tmp:
        pq.write_table(arrow.replace_schema_metadata(None), tmp, compression="zstd", write_statistics=False)
    return path


def require_sweep_dataset(params: Params, dataset: str) -> None:
    """Refuse a dataset outside ``evireform.sweep.datasets`` or without EviReform's index."""
    if dataset not in params.evireform.sweep.datasets:
        raise ValueError(f"{dataset!r} is not in evireform.sweep.datasets "
                         f"{params.evireform.sweep.datasets}")
    if dataset not in params.evireform_datasets:
        raise ValueError(f"{dataset!r} is not in evireform_datasets: no EviReform index to sweep")


def sweep(dataset: str, params_file: Path) -> dict[str, Any]:
    """The stage body (module docstring); returns the one-line summary."""
    from evichain.config import load_params
    from evichain.io import write_json
    from evichain.methods.evireform.sweep import not_run_note, sweep_figure, sweep_summary
    from evichain.paths import DatasetPaths
    from flows.sweep import run_sweep

    params = load_params(params_file)
    require_sweep_dataset(params, dataset)
    out = run_sweep(DatasetPaths(dataset), params)
    reliable_only = (params.evaluate.twowiki_reliable_only
                     and params.data.source_of(dataset) == "2wiki")
    summary = sweep_summary(out.table, params.evireform, dataset, out.usage, reliable_only)
    summary["not_run"] = out.summary["not_run"]
    summary["default_reformulation_calls"] = out.summary["default_reformulation_calls"]
    failed = out.summary["default_failed_questions"]
    summary["default_failed_questions"] = failed
    table_path, json_path, figure_path = sweep_files(dataset)
    write_table(out.table, table_path)
    write_json(summary, json_path)
    notes = {k: not_run_note(v["values"], v["llm_calls_needed"]) for k, v in summary["not_run"].items()}
    sweep_figure(summary, params.evireform, figure_path, notes, failed)
    requests = sum(int(u.get("requests", 0)) for u in out.usage.values())
    failures = sum(int(u.get("failures", 0)) for u in out.usage.values())
    limit = params.llm.max_failure_rate
    check_failure_rate(failures, requests, limit, key="llm.max_failure_rate", what="LLM requests",
                       see=json_path)
    check_failure_rate(len(failed), out.summary["questions"], limit, key="llm.max_failure_rate",
                       what="questions (default run)", see=json_path)
    return {"dataset": dataset, "n_questions": summary["n_questions"],
            "configurations": out.summary["configurations"], "llm_calls": out.summary["llm_calls"],
            "seconds_per_config": out.summary["seconds"], "not_run": summary["not_run"],
            "default_failed_questions": failed}


@app.command()
def main(dataset: str = typer.Option(...),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    run_stage(f"sweep_evireform@{dataset}", lambda: sweep(dataset, params_file))


if __name__ == "__main__":
    app()
