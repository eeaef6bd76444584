"""DVC stage ``retrieve_cee@<dataset>-<variant>``: CEE retrieval (paper §2.3.2–2.3.4) for one
variant (``full``, ``no_coverage``, ``no_contrastive``, ``no_sequential``, and ours,
``robust``; see :data:`evichain.methods.cee.params.VARIANTS`).

Reads the corpus, questions and ``facets.parquet`` — except for a variant whose
``cee.facets.source`` is ``sentences`` (``robust``), which builds LLM-free sentence facets for
every passage inside the flow and never opens ``facets.parquet`` (its usage file then holds
``facets``: source, passages with facets, counts; and ``bridge_added`` with bridge expansion).
Writes ``runs/cee-<variant>.parquet``
(question_id, rank, passage_id, score; up to ``cee.top_k`` rows), ``traces/cee-<variant>.parquet``
(one row per question: probes per round, summaries, pool sizes, selected ids, tokens; see
:mod:`evichain.methods.cee.retrieve`) and ``usage/retrieve_cee-<variant>.json`` (stop reasons,
pool sizes, latency of scoring + selection excluding LLM calls, LLM calls / cache hits: the
variants share exploration prompts, so after ``full`` the others are mostly cache hits).
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
        from evichain.methods.cee.params import variant_params
        from evichain.paths import DatasetPaths
        from flows.cee import run_retrieval

        params = load_params(params_file)
        settings = variant_params(params.cee, variant)
        paths = DatasetPaths(dataset)
        out = run_retrieval(paths, settings, params.llm, params.embed, orch=params.orchestration,
                            stage=f"retrieve_cee-{variant}")
        method = f"cee-{variant}"
        summary = write_method_outputs(dataset, method, variant, f"retrieve_cee-{variant}", out,
                                       params.llm.max_failure_rate)
        return {"dataset": dataset, "method": method, "questions": summary["questions"],
                "mean_pool_size": summary["mean_pool_size"],
                "llm_calls": summary["llm_usage"].get("calls", 0),
                "cache_hits": summary["llm_usage"].get("cache_hits", 0),
                "compute_p50_ms": summary["latency_compute"]["p50_ms"],
                **({"facet_source": summary["facets"]["source"],
                    "passages_with_facets": summary["facets"]["passages_with_facets"]}
                   if "facets" in summary else {}),
                **({"bridge_added": summary["bridge_added"]} if "bridge_added" in summary else {})}

    run_stage(f"retrieve_cee@{dataset}-{variant}", body)


if __name__ == "__main__":
    app()
