"""DVC stage ``retrieve_<method>@<dataset>`` of the first-stage retrievers (``bm25``, ``dense``):
questions + corpus → ``runs/<method>.parquet``.

The method is built from the registry and run by the one retrieval flow of every method
(:func:`flows.method.run_method`; BM25 and dense score shards of questions in bulk); the stage
writes the run, sorted, and nothing else.
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import run_stage

FIRST_STAGE: tuple[str, ...] = ("bm25", "dense")
"""The methods this stage runs (their runs feed the rerankers, fusion and the readers)."""

app = typer.Typer(add_completion=False)


@app.command()
def main(dataset: str = typer.Option(...), method: str = typer.Option(...),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.io import write_parquet
        from evichain.paths import DatasetPaths
        from flows.method import run_method

        if method not in FIRST_STAGE:
            raise ValueError(f"unknown retrieval method '{method}'; known: {sorted(FIRST_STAGE)}")
        params = load_params(params_file)
        paths = DatasetPaths(dataset)
        run = run_method(paths, method, None, params, stage=f"retrieve-{method}").run
        run = run.sort_values(["question_id", "rank"], kind="stable").reset_index(drop=True)
        write_parquet(run, paths.run(method))
        return {"dataset": dataset, "method": method, "questions": int(run["question_id"].nunique()),
                "rows": len(run)}

    run_stage(f"retrieve@{dataset}-{method}", body)


if __name__ == "__main__":
    app()
