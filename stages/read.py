"""DVC stage ``read@<dataset>-<method>``: a method's final context → answers (qa/<method>.parquet).

``--method direct`` answers without context (Listing 3). Ranking methods give their top
``read.context_k`` passages to the shared reader (Listing 4). ``--evidence`` reads an iterative
method's own final evidence (``evidence/<method>.parquet``) cut to ``read.budget_tokens``. Failed calls are status rows;
the stage fails only if more than ``read.max_failure_rate`` of the questions failed.
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import check_failure_rate, run_stage

app = typer.Typer(add_completion=False)


@app.command()
def main(dataset: str = typer.Option(...), method: str = typer.Option(...),
         evidence: bool = typer.Option(False, "--evidence",
                                       help="read the method's own evidence table"),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.io import write_json, write_parquet
        from evichain.paths import DatasetPaths
        from flows.common import with_runner
        from flows.read import read_flow

        params = load_params(params_file)
        paths = DatasetPaths(dataset)
        run_path = None if method == "direct" or evidence else paths.run(method)
        evidence_path = paths.evidence(method) if evidence else None
        table, usage = with_runner(read_flow, params.orchestration)(
            paths.questions, paths.corpus, run_path, params.read.context_k, params.llm,
            f"read@{dataset}-{method}", evidence_path, params.read.budget_tokens)
        write_parquet(table, paths.qa(method))
        write_json({"stage": f"read@{dataset}-{method}", "model": params.llm.model, **usage.as_dict()},
                   paths.usage(f"read-{method}"))
        failed = int((table["status"] != "ok").sum())
        check_failure_rate(failed, len(table), params.read.max_failure_rate,
                           key="read.max_failure_rate", what="answers", see=paths.qa(method))
        return {"dataset": dataset, "method": method, "questions": len(table), "failed": failed,
                "llm_calls": usage.calls, "cache_hits": usage.cache_hits}

    run_stage(f"read@{dataset}-{method}", body)


if __name__ == "__main__":
    app()
