"""EviReform sensitivity lines (Figure of the paper's sweep; ``evichain sensitivity``).

After the one-at-a-time sweep of the README ("Parameters"), the listing of ``dvc exp show
--json`` gives one point per experiment that changes a single swept parameter
(:func:`evichain.report.sensitivity.one_at_a_time`). :func:`write_sensitivity` writes them to
``reports/plots/sensitivity.csv`` (param, value, dataset, method, metric, score, experiment)
and draws ``reports/sensitivity/<metric>.png`` (one panel per swept parameter, the default
marked). Not under ``reports/figures``: that folder is the ``report`` stage's output and DVC
clears it before each run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from evichain.io import write_text
from evichain.paths import ReportPaths
from evichain.report.sensitivity import flatten, one_at_a_time

SWEPT = ["evireform.alpha", "evireform.beta", "evireform.k_r", "evireform.max_residual_queries"]


def write_sensitivity(show: list[dict[str, Any]], datasets: Sequence[str], methods: Sequence[str],
                      metrics: Sequence[str], params: dict[str, Any],
                      paths: ReportPaths | None = None) -> tuple[int, Path, Path]:
    """Write the sweep's points (CSV) and one figure per metric; return (points, CSV, folder).

    ``show``: the parsed ``dvc exp show --json``; ``params``: the params as a nested dict (the
    defaults of :data:`SWEPT` are marked on the figures). No swept parameter with two or more
    values is a ``ValueError``.
    """
    from evichain.report.figures import sensitivity_figure

    table = one_at_a_time(show, SWEPT, [(d, m) for d in datasets for m in methods], metrics)
    table = table.filter(pl.col("value").n_unique().over("param") >= 2)  # swept params only
    if table.height == 0:
        raise ValueError("no one-at-a-time sweep found in `dvc exp show` (see README 'Parameters')")
    paths = paths or ReportPaths()
    csv = paths.plot_data("sensitivity")
    write_text(table.write_csv(), csv)
    defaults = {k: float(v) for k, v in flatten(params).items() if k in SWEPT}
    folder = paths.root / "sensitivity"
    for m in metrics:
        sensitivity_figure(table, folder / f"{m.replace('@', '')}.png", metric=m, defaults=defaults)
    return table.height, csv, folder
