"""DVC stages ``export_runs@<dataset>`` and ``export_answers@<dataset>`` (issue 63, item 7).

``--what runs``: the qrels of the evaluated questions → ``reports/runs/<ds>/qrels.txt``, and every
run ``artifacts/<ds>/runs/<m>.parquet`` that a metrics JSON ``reports/metrics/<ds>/<m>.json``
reports → ``reports/runs/<ds>/<m>.trec.gz``. ``--what answers``: the gold answers of the evaluated
questions → ``reports/answers/<ds>/gold.json``, and every reader table
``artifacts/<ds>/qa/<m>.parquet`` that ``qa-<m>.json`` reports → ``reports/answers/<ds>/<m>.jsonl``.
``--what all`` does both. Formats and the question filter (``evaluate.twowiki_reliable_only`` on
2Wiki sources, as stages/evaluate.py): :mod:`evichain.report.runs_export`. A reported run or
answer table absent from this machine is listed in the summary (``not_here``) and its committed
export, if any, is left as it is.
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import run_stage

app = typer.Typer(add_completion=False)

WHAT = ("runs", "answers", "all")


@app.command()
def main(dataset: str = typer.Option(...),
         what: str = typer.Option("all", help="runs | answers | all"),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.paths import DatasetPaths, ReportPaths
        from evichain.report.runs_export import export_answers, export_runs

        if what not in WHAT:
            raise ValueError(f"--what must be one of {', '.join(WHAT)}, got {what!r}")
        params = load_params(params_file)
        reliable_only = (params.evaluate.twowiki_reliable_only
                         and params.data.source_of(dataset) == "2wiki")
        paths, reports = DatasetPaths(dataset), ReportPaths().root
        summary: dict[str, object] = {"dataset": dataset}
        if what in ("runs", "all"):
            summary["runs"] = export_runs(paths, reports, reliable_only)
        if what in ("answers", "all"):
            summary["answers"] = export_answers(paths, reports, reliable_only)
        return summary

    run_stage(f"export_{'runs' if what == 'all' else what}@{dataset}", body)


if __name__ == "__main__":
    app()
