"""DVC stage ``extract_triples@<dataset>``: corpus → the shared HippoRAG 2 / CatRAG OpenIE index.

``graph.openie`` (per dataset: ``graph.openie_by_dataset``) selects HippoRAG's LLM OpenIE (NER +
triples per passage, resumable from the LLM cache and shard checkpoints) or the LLM-free
triples of the EviReform proposition index (:mod:`evichain.methods.graph.openie`).

Writes ``artifacts/<ds>/index/triples.parquet`` (triple_id, passage_id, subject, predicate,
object, source, prop_id), ``index/openie_status.parquet`` (one row per passage: ok / failed with
the step and reason, entities, counts of dropped malformed / repeated triples, tokens) and
``usage/extract_triples.json``. A failed passage never stops the stage; the stage fails (exit 2,
after writing its tables) when the failure rate exceeds ``graph.openie_max_failure_rate``.
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import check_failure_rate, run_stage

app = typer.Typer(add_completion=False)


@app.command()
def main(dataset: str = typer.Option(...),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.io import write_json, write_parquet
        from evichain.paths import DatasetPaths
        from flows.graph import run_extraction

        params = load_params(params_file)
        graph = params.graph
        openie = graph.openie_for(dataset)
        paths = DatasetPaths(dataset)
        out = run_extraction(paths, graph, openie, params.llm, orch=params.orchestration)
        write_parquet(out.triples, paths.index_file("triples.parquet"))
        write_parquet(out.status, paths.index_file("openie_status.parquet"))
        summary = {"dataset": dataset, **out.summary}
        write_json(summary, paths.usage("extract_triples"))
        check_failure_rate(out.summary["failed"], out.summary["passages"],
                           graph.openie_max_failure_rate, key="graph.openie_max_failure_rate",
                           what="passage OpenIE calls", see=paths.index_file("openie_status.parquet"))
        return {k: summary[k] for k in ("dataset", "openie", "passages", "ok", "failed", "triples")}

    run_stage(f"extract_triples@{dataset}", body)


if __name__ == "__main__":
    app()
