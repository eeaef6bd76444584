"""DVC stage ``retrieve_evireform@<dataset>-<variant>``: EviReform retrieval for one variant.

Reads the corpus, questions and the EviReform index tables; writes
``runs/evireform-<variant>.parquet`` (question_id, rank, passage_id, score),
``traces/evireform-<variant>.parquet`` (one row per question: candidate/selected ids,
fallbacks, observed passages, residual queries, retained residual propositions, tokens,
pool coverage C₀/C₊; see :mod:`evichain.methods.evireform.retrieve`) and
``usage/retrieve_evireform-<variant>.json`` (fallback counts, latency excluding LLM calls,
LLM calls / cache hits: zero calls on a re-run with a warm cache).
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import run_stage, write_method_outputs

app = typer.Typer(add_completion=False)


@app.command()
def main(dataset: str = typer.Option(...), variant: str = typer.Option("full"),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.methods.evireform.variants import variant_params
        from evichain.paths import DatasetPaths
        from flows.evireform import run_retrieval

        params = load_params(params_file)
        settings = variant_params(params.evireform, variant)
        paths = DatasetPaths(dataset)
        out = run_retrieval(paths, settings, params.llm, params.embed, orch=params.orchestration,
                            stage=f"retrieve_evireform-{variant}")
        method = f"evireform-{variant}"
        summary = write_method_outputs(dataset, method, variant, f"retrieve_evireform-{variant}", out,
                                       params.llm.max_failure_rate)
        return {"dataset": dataset, "method": method, "questions": summary["questions"],
                "llm_calls": summary["llm_usage"].get("calls", 0),
                "selection_fallbacks": summary["selection_fallbacks"],
                "residual_fallbacks": summary["residual_fallbacks"],
                "compute_p50_ms": summary["latency_compute"]["p50_ms"]}

    run_stage(f"retrieve_evireform@{dataset}-{variant}", body)


if __name__ == "__main__":
    app()
