"""DVC stage ``retrieve_graph@<dataset>-<method>``: HippoRAG 2, CatRAG or PropRAG retrieval.

Re-implementations (see :mod:`evichain.methods.graph`). HippoRAG 2 and CatRAG read the shared
OpenIE index (``index/triples.parquet``); PropRAG reads the EviReform proposition index
(``index/propositions.parquet``, ``entities.parquet``, ``incidence.parquet``).

Writes ``runs/<method>.parquet`` (question_id, rank, passage_id, score; ``graph.top_k`` per
question), ``traces/<method>.parquet`` (one row per question: linked and kept facts, seeds,
anchors, scored edges, beam paths, fallbacks, status / error_kind of LLM calls, tokens) and
``usage/retrieve-<method>.json`` (status / fallback / repair counts, latency excluding LLM calls
p50 / p95, index statistics, LLM usage).
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import run_stage, write_method_outputs

app = typer.Typer(add_completion=False)


@app.command()
def main(dataset: str = typer.Option(...), method: str = typer.Option(...),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import ParamsError, load_params
        from evichain.methods.graph.params import METHODS
        from evichain.paths import DatasetPaths
        from flows.graph import run_retrieval

        if method not in METHODS:
            raise ParamsError(f"--method {method!r}: known graph methods are {list(METHODS)}")
        params = load_params(params_file)
        out = run_retrieval(DatasetPaths(dataset), params.graph, method, params.llm, params.embed,
                            orch=params.orchestration, stage=f"retrieve-{method}")
        summary = write_method_outputs(dataset, method, method, f"retrieve-{method}", out,
                                       params.llm.max_failure_rate)
        return {"dataset": dataset, "method": method, "questions": summary["questions"],
                "llm_calls": summary["llm_usage"].get("calls", 0), "fallbacks": summary["fallbacks"],
                "compute_p50_ms": summary["latency_compute"]["p50_ms"]}

    run_stage(f"retrieve_graph@{dataset}-{method}", body)


if __name__ == "__main__":
    app()
