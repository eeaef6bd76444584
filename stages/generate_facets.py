"""DVC stage ``generate_facets@<dataset>``: corpus → CEE contrastive facets (paper §2.3.1).

Writes ``artifacts/<ds>/facets.parquet`` (facet_id, passage_id, neighbour_id, facet_query),
``artifacts/<ds>/facet_status.parquet`` (one row per (target, neighbour) pair: ok / failed +
reason, tokens) and ``usage/generate_facets.json`` (summary: scope, counts, failure rate, the
pre-run estimate, LLM usage, and the settings it ran with: ``machine_restricted`` is true for
the datasets of ``cee.facets.restricted``, which run with that block's scope and pair cap
instead of the paper's defaults). Prints the token/cost estimate before the first LLM call. A failed
pair never stops the stage; the stage fails (exit 2, after writing its tables) only when the
pair failure rate exceeds ``cee.facets.max_failure_rate``. Resuming after an interruption: see
:mod:`flows.cee` (LLM cache + shard checkpoints; finished pairs are never called again).
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
        from flows.cee import facet_status_path, facets_path, run_facets

        params = load_params(params_file)
        paths = DatasetPaths(dataset)
        facet_params = params.cee.facets.for_dataset(dataset)
        cee = params.cee.model_copy(update={"facets": facet_params})
        out = run_facets(paths, cee, params.llm, params.embed, orch=params.orchestration)
        write_parquet(out.facets, facets_path(paths))
        write_parquet(out.status, facet_status_path(paths))
        summary = {"dataset": dataset, **out.summary,
                   "machine_restricted": params.cee.facets.is_restricted(dataset),
                   "facet_scope_n": facet_params.facet_scope_n,
                   "n_neighbours": facet_params.n_neighbours,
                   "max_pairs_per_passage": facet_params.max_pairs_per_passage}
        write_json(summary, paths.usage("generate_facets"))
        check_failure_rate(summary["pairs_failed"], summary["pairs"],
                           params.cee.facets.max_failure_rate, key="cee.facets.max_failure_rate",
                           what="facet pairs", see=facet_status_path(paths))
        return {k: summary[k] for k in ("dataset", "facet_scope", "targets", "pairs", "pairs_ok",
                                        "pairs_failed", "facets", "resumed_pairs")} | {
            "llm_calls": summary["llm_usage"]["calls"]}

    run_stage(f"generate_facets@{dataset}", body)


if __name__ == "__main__":
    app()
