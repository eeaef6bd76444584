"""DVC stage ``tune_evireform@<dataset>``: grid search of the ``robust`` and ``hybrid`` variants
(ours, issue 38) on a dataset of ``tuning_datasets`` (a sample outside every reported one).

Reads that dataset's index and questions; the LLM answers are ``full``'s (same prompts), so the
stage depends on ``full``'s trace and replays them from the LLM cache. Writes
``reports/tuning/<dataset>-evireform.csv`` (one row per configuration: its values, the
objective and every metric's mean) and ``reports/tuning/<dataset>-evireform.json`` (the
chosen values, the objective, the question count). The chosen values are copied into
``evireform.robust`` of ``params.yaml`` by hand, and ``tests/test_tuning_recorded.py`` checks
that they agree, so a report never runs with values the tuning did not choose.
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import run_stage

app = typer.Typer(add_completion=False)

TUNING_DIR = Path("reports/tuning")


def tuning_files(dataset: str) -> tuple[Path, Path]:
    """(csv, json) of a dataset's EviReform tuning results."""
    return TUNING_DIR / f"{dataset}-evireform.csv", TUNING_DIR / f"{dataset}-evireform.json"


@app.command()
def main(dataset: str = typer.Option(...),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.io import write_json
        from evichain.paths import DatasetPaths
        from flows.evireform import run_tuning

        params = load_params(params_file)
        if dataset not in params.tuning_datasets:
            raise ValueError(f"{dataset!r} is not in tuning_datasets {params.tuning_datasets}: "
                             "tune only on samples outside the reported ones")
        out = run_tuning(DatasetPaths(dataset), params.evireform, params.llm, params.embed,
                         orch=params.orchestration)
        csv_path, json_path = tuning_files(dataset)
        csv_path.parent.mkdir(parents=True, exist_ok=True)
        out.table.round(6).to_csv(csv_path, index=False)
        write_json({"dataset": dataset, "chosen": out.chosen, **out.summary}, json_path)
        return {"dataset": dataset, "chosen": out.chosen,
                "configurations": out.summary["configurations"],
                "llm_calls": out.summary["llm_usage"].get("calls", 0)}

    run_stage(f"tune_evireform@{dataset}", body)


if __name__ == "__main__":
    app()
