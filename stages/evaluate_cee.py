"""DVC stage ``evaluate_cee@<dataset>-<variant>``: :mod:`stages.evaluate` for ``cee-<variant>``,
then the facet index's setup added to its metrics JSON as ``facets``.

``facets`` (from ``artifacts/<ds>/usage/generate_facets.json``): ``machine_restricted`` (the
dataset is in ``cee.facets.restricted``), scope, neighbours, pair cap, and how many passages,
pairs and facet queries the index holds, so the report can label a restricted run as such.
A variant whose facets were built inside retrieval (``cee.facets.source: sentences``, the
``robust`` variant) has its own ``facets`` block in ``usage/retrieve_cee-<variant>.json``; that
block is used instead.
"""

from __future__ import annotations

from pathlib import Path

import typer

from evichain.io import read_json, write_json
from evichain.paths import DatasetPaths, ReportPaths

app = typer.Typer(add_completion=False)

FACET_SETUP_KEYS: tuple[str, ...] = (
    "machine_restricted", "facet_scope", "facet_scope_n", "n_neighbours", "max_pairs_per_passage",
    "passages", "passages_with_facets", "pairs", "pairs_failed", "facets")


def facet_setup(paths: DatasetPaths, variant: str = "full") -> dict[str, object]:
    """What the facet index of ``variant`` was built with: the retrieval usage's own ``facets``
    block when it has one (facets built in retrieval), else ``generate_facets``' usage ({} if
    neither exists)."""
    own = paths.usage(f"retrieve_cee-{variant}")
    if own.exists() and isinstance(read_json(own).get("facets"), dict):
        return dict(read_json(own)["facets"])
    path = paths.usage("generate_facets")
    if not path.exists():  # facets.parquet made outside the generate_facets stage
        return {}
    usage = read_json(path)
    return {k: usage[k] for k in FACET_SETUP_KEYS if k in usage}


@app.command()
def main(dataset: str = typer.Option(...), variant: str = typer.Option("full"),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    from stages import evaluate

    method = f"cee-{variant}"
    evaluate.main(dataset=dataset, method=method, kind="retrieval", params_file=params_file)
    path = ReportPaths().metrics(dataset, method)
    write_json({**read_json(path), "facets": facet_setup(DatasetPaths(dataset), variant)}, path)


if __name__ == "__main__":
    app()
