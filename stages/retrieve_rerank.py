"""DVC stage ``retrieve_rerank@<dataset>-<method>``: rerank the dense top-``rerank.pool_size``
pool (EviReform §4.1, Table C.2) with ``listwise`` (Listing 14, the LLM) or ``cross_encoder``.

Reads the corpus, questions and ``runs/dense.parquet``; writes ``runs/rerank-<method>.parquet``
(the reordered pool, then the rest of the dense run), ``traces/rerank-<method>.parquet`` (one
row per question: pool ids, reranked ids, status, fallback, repair counts of the model's id list,
words per passage used, tokens) and ``usage/retrieve-rerank-<method>.json``. A cross-encoder
without offline weights stops the stage with a one-line error naming the model.
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import run_stage, write_method_outputs

app = typer.Typer(add_completion=False)


@app.command()
def main(dataset: str = typer.Option(...), method: str = typer.Option("listwise"),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.methods.rerank.params import run_name
        from evichain.paths import DatasetPaths
        from flows.rerank import run_rerank

        params = load_params(params_file)
        name = run_name(method)
        out = run_rerank(DatasetPaths(dataset), method, params.rerank, params.retrieval.dense,
                         params.embed, params.llm, orch=params.orchestration,
                         stage=f"retrieve_rerank-{method}")
        summary = write_method_outputs(dataset, name, method, f"retrieve-{name}", out,
                                       params.llm.max_failure_rate)
        return {"dataset": dataset, "method": name, "questions": summary["questions"],
                "status": summary["status"], "fallbacks": summary["fallbacks"],
                "pool_source": summary["pool_source"],
                "llm_calls": summary["llm_usage"].get("calls", 0)}

    run_stage(f"retrieve_rerank@{dataset}-{method}", body)


if __name__ == "__main__":
    app()
