"""DVC stage ``extract_propositions@<dataset>``: corpus → EviReform propositions + status.

Writes ``artifacts/<ds>/index/propositions.parquet`` (prop_id, passage_id, text, entities,
extractor), ``index/extraction_status.parquet`` (one row per passage: ok / failed + reason)
and ``usage/extract_propositions.json`` (summary: extractor, counts, failure rate, tokens).
A failed passage never stops the stage; the stage fails (exit 2, after writing its tables)
only when the failure rate exceeds ``evireform.index.max_failure_rate``. Resuming after an
interruption: see :mod:`flows.evireform` (LLM cache + shard checkpoints).
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
        from flows.evireform import run_extraction

        params = load_params(params_file)
        index = params.evireform.index.for_dataset(dataset)
        paths = DatasetPaths(dataset)
        out = run_extraction(paths, index, params.llm, orch=params.orchestration)
        write_parquet(out.propositions, paths.index_file("propositions.parquet"))
        write_parquet(out.status, paths.index_file("extraction_status.parquet"))
        summary = {"dataset": dataset, **out.summary}
        write_json(summary, paths.usage("extract_propositions"))
        check_failure_rate(out.summary["failed"], out.summary["passages"], index.max_failure_rate,
                           key="evireform.index.max_failure_rate", what="passage extractions",
                           see=paths.index_file("extraction_status.parquet"))
        return {k: summary[k] for k in ("dataset", "extractor", "passages", "ok", "failed",
                                        "fallback_sentences", "propositions")}

    run_stage(f"extract_propositions@{dataset}", body)


if __name__ == "__main__":
    app()
