"""DVC stage ``tune_evireform@<dataset>``: grid search of the ``robust`` and ``hybrid`` variants
(ours, issue 38) on a dataset of ``tuning_datasets`` (a sample outside every reported one).

Reads that dataset's index and questions; the LLM answers are ``full``'s (same prompts), so the
stage depends on ``full``'s trace and replays them from the LLM cache. Writes
``reports/tuning/<dataset>-evireform.csv`` (one row per configuration: its values, the
objective and every metric's mean) and ``reports/tuning/<dataset>-evireform.json`` (the
chosen values, the objective, the question count). The chosen values are copied into
``evireform.robust`` of ``params.yaml`` by hand, and ``tests/test_tuning_recorded.py`` checks
that they agree, so a report never runs with values the tuning did not choose. Fails (after
writing) above ``llm.max_failure_rate`` of failed LLM requests.
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import run_stage
from stages._tuning import finish_tuning, require_tuning_dataset

app = typer.Typer(add_completion=False)


@app.command()
def main(dataset: str = typer.Option(...),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.paths import DatasetPaths
        from flows.evireform import run_tuning

        params = load_params(params_file)
        require_tuning_dataset(params, dataset)
        out = run_tuning(DatasetPaths(dataset), params.evireform, params.llm, params.embed,
                         orch=params.orchestration)
        return finish_tuning(dataset, "evireform", params, out.table, out.chosen, out.summary)

    run_stage(f"tune_evireform@{dataset}", body)


if __name__ == "__main__":
    app()
