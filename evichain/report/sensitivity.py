"""Sensitivity tables from ``dvc exp show --json``: one parameter varied at a time.

``dvc exp show --json`` lists the workspace/baseline and every experiment with its params and
metrics. An experiment belongs to the sweep of parameter ``p`` when ``p`` is the only swept
parameter whose value differs from the baseline; the baseline itself is the point at the
default value of every parameter. Metrics come from the metrics files of the report
(``reports/metrics/<dataset>/<method>.json``), so each row is (param, value, dataset, method,
metric, score).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import polars as pl

SWEEP_SCHEMA: dict[str, type[pl.DataType]] = {
    "param": pl.String, "value": pl.Float64, "dataset": pl.String, "method": pl.String,
    "metric": pl.String, "score": pl.Float64, "experiment": pl.String}


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.update(flatten(value, name))
        else:
            out[name] = value
    return out


def experiments(show: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(name, flat params, metrics by file) of the baseline and each experiment in ``show``."""
    found = []
    for commit in show:
        for record in [commit, *[e for exp in commit.get("experiments") or []
                                  for e in exp.get("revs") or []]]:
            data = record.get("data") or {}
            params = flatten((data.get("params") or {}).get("params.yaml", {}).get("data", {}))
            metrics = {path: (m or {}).get("data", {}) for path, m in (data.get("metrics") or {}).items()}
            found.append((record.get("name") or record.get("rev", "workspace"), params, metrics))
    return found


def one_at_a_time(show: list[dict[str, Any]], swept: Sequence[str],
                  targets: Iterable[tuple[str, str]], metrics: Sequence[str]) -> pl.DataFrame:
    """Rows of :data:`SWEEP_SCHEMA` for each experiment that changes exactly one of ``swept``
    (a point listed twice kept once, its first listing).

    ``targets``: (dataset, method) pairs whose metrics file is read; ``show[0]``'s first
    record is the baseline (``dvc exp show --json`` lists the workspace first).
    """
    runs = experiments(show)
    if not runs:
        return pl.DataFrame(schema=SWEEP_SCHEMA)
    base = runs[0][1]
    rows = []
    for name, params, files in runs:
        changed = [p for p in swept if params.get(p) != base.get(p)]
        if len(changed) > 1:
            continue
        for param in (changed or swept):  # the baseline is a point on every line
            for ds, method in targets:
                values = files.get(f"reports/metrics/{ds}/{method}.json", {})
                rows += [(param, float(params[param]), ds, method, m, float(values[m]), name)
                         for m in metrics if m in values and param in params]
    table = pl.DataFrame(rows, schema=SWEEP_SCHEMA, orient="row")
    return table.unique(["param", "value", "dataset", "method", "metric"], keep="first", maintain_order=True)
