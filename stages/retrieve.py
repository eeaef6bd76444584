"""DVC stage ``retrieve@<dataset>-<method>``: questions + corpus → runs/<method>.parquet.

Methods are looked up in :data:`METHODS`; each entry runs its Prefect flow and returns the
run table (question_id, rank, passage_id, score).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import typer

from stages._common import run_stage

from evichain.config import Params  # noqa: E402  (after the environment defaults)
from evichain.paths import DatasetPaths  # noqa: E402

app = typer.Typer(add_completion=False)

RetrieveFn = Callable[[DatasetPaths, Params], pd.DataFrame]


def _bm25(paths: DatasetPaths, params: Params) -> pd.DataFrame:
    from flows.common import with_runner
    from flows.retrieve import bm25_flow

    return with_runner(bm25_flow, params.orchestration)(paths.corpus, paths.questions, params.retrieval.bm25, params.orchestration)


def _dense(paths: DatasetPaths, params: Params) -> pd.DataFrame:
    from flows.common import with_runner
    from flows.retrieve import dense_flow

    return with_runner(dense_flow, params.orchestration)(paths.corpus, paths.questions, params.retrieval.dense, params.embed,
                      params.orchestration)


METHODS: dict[str, RetrieveFn] = {"bm25": _bm25, "dense": _dense}


@app.command()
def main(dataset: str = typer.Option(...), method: str = typer.Option(...),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.io import write_parquet

        if method not in METHODS:
            raise ValueError(f"unknown retrieval method '{method}'; known: {sorted(METHODS)}")
        params = load_params(params_file)
        paths = DatasetPaths(dataset)
        run = METHODS[method](paths, params)
        run = run.sort_values(["question_id", "rank"], kind="stable").reset_index(drop=True)
        write_parquet(run, paths.run(method))
        return {"dataset": dataset, "method": method, "questions": int(run["question_id"].nunique()),
                "rows": len(run)}

    run_stage(f"retrieve@{dataset}-{method}", body)


if __name__ == "__main__":
    app()
