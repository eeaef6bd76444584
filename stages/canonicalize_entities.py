"""DVC stage ``canonicalize_entities@<dataset>``: propositions → entities + incidence.

Writes ``artifacts/<ds>/index/entities.parquet`` (entity_id, name, aliases, is_title, degree),
``index/incidence.parquet`` (prop_id, entity_id) and the index statistics of Table C.10 with
the entity degree distribution: ``index/evireform_stats.json`` and ``index/evireform_stats.md``.
No LLM: normalisation + rapidfuzz merging (``evireform.index.fuzzy_threshold``).
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import run_stage

app = typer.Typer(add_completion=False)


@app.command()
def main(dataset: str = typer.Option(...),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.io import read_parquet, write_json, write_parquet, write_text
        from evichain.methods.evireform.canonicalize import canonicalize
        from evichain.methods.evireform.index import (
            index_statistics,
            statistics_markdown,
        )
        from evichain.paths import DatasetPaths, ReportPaths
        from evichain.report.index_stats import write_index_stats

        index = load_params(params_file).evireform.index
        paths = DatasetPaths(dataset)
        corpus = read_parquet(paths.corpus)
        props = read_parquet(paths.index_file("propositions.parquet"))
        status = read_parquet(paths.index_file("extraction_status.parquet"))
        entities, incidence = canonicalize(props, corpus["title"].tolist(), index.fuzzy_threshold,
                                           index.fuzzy_min_chars)
        write_parquet(entities, paths.index_file("entities.parquet"))
        write_parquet(incidence, paths.index_file("incidence.parquet"))
        stats = {"dataset": dataset, **index_statistics(corpus, props, entities, incidence, status)}
        write_json(stats, paths.index_file("evireform_stats.json"))
        write_index_stats(stats, ReportPaths().index_stats, dataset, "evireform")  # committed (C.10)
        write_text(statistics_markdown(dataset, stats), paths.index_file("evireform_stats.md"))
        keys = ("dataset", "passages", "propositions", "entities", "incidence_nonzeros",
                "propositions_per_passage", "extractor")
        return {k: stats[k] for k in keys} | {"max_entity_degree": stats["entity_degree"]["max"]}

    run_stage(f"canonicalize_entities@{dataset}", body)


if __name__ == "__main__":
    app()
