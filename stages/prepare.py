"""DVC stage ``prepare@<dataset>``: source files → corpus.parquet + questions.parquet."""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import run_stage

app = typer.Typer(add_completion=False)


@app.command()
def main(dataset: str = typer.Option(..., help="demo | 2wiki | musique | hotpotqa | medical"),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.io import write_parquet
        from evichain.paths import DatasetPaths
        from flows.common import with_runner
        from flows.prepare import prepare_flow

        params = load_params(params_file)
        corpus, questions = with_runner(prepare_flow, params.orchestration)(
            dataset, Path(params.data.source_dir), params.data)
        paths = DatasetPaths(dataset)
        write_parquet(corpus, paths.corpus)
        write_parquet(questions, paths.questions)
        return {"dataset": dataset, "passages": len(corpus), "questions": len(questions)}

    run_stage(f"prepare@{dataset}", body)


if __name__ == "__main__":
    app()
