"""DVC stage ``fuse@<dataset>`` (ours, issue 38): runs of ``fusion.runs`` → runs/<fusion.name>.parquet.

Reads the stored run tables (and traces) of the fused methods, runs
:func:`flows.fuse.fusion_flow` and writes the fused run and a trace of the runs' LLM tokens
per question; ``evaluate_fused@<dataset>`` scores it like any other run.
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import run_stage

from evichain.paths import DatasetPaths  # noqa: E402  (after the environment defaults)

app = typer.Typer(add_completion=False)


@app.command()
def main(dataset: str = typer.Option(...),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.io import write_parquet
        from flows.common import with_runner
        from flows.fuse import fusion_flow

        params = load_params(params_file)
        paths = DatasetPaths(dataset)
        fusion = params.fusion
        run, trace = with_runner(fusion_flow, params.orchestration)(
            {name: paths.run(name) for name in fusion.runs}, fusion,
            {name: paths.trace(name) for name in fusion.runs})
        write_parquet(run, paths.run(fusion.name))
        write_parquet(trace, paths.trace(fusion.name))
        return {"dataset": dataset, "method": fusion.name, "runs": fusion.runs,
                "weights": fusion.weights, "questions": int(run["question_id"].nunique())}

    run_stage(f"fuse@{dataset}", body)


if __name__ == "__main__":
    app()
