"""Deterministic PNG figures: Recall@K curves, paired differences with CIs (Figure A.1) and
one-parameter sensitivity lines from a ``dvc exp`` sweep.

Figures are drawn on an Agg canvas without ``pyplot`` (no global backend or figure state), under
matplotlib's default style (a user's ``matplotlibrc`` cannot change the output), and saved
without the ``Software`` PNG text chunk; the Agg PNG writer adds no timestamp, so the same input
gives the same bytes on the same matplotlib/freetype build.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import matplotlib
import matplotlib.style
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from evichain.io import atomic_path

DPI = 150
_RC = {"svg.hashsalt": "evichain", "font.family": "DejaVu Sans", "path.simplify": True}
_AT_K = re.compile(r"^(?P<family>.+)@(?P<k>\d+)$")


def recall_at_k_figure(
    metrics: pd.DataFrame, path: str | Path, *, dataset: str, family: str = "Recall"
) -> Path:
    """Line plot of ``<family>@K`` (in %) against ``K``, one line per method.

    ``metrics``: index = method, columns include ``Recall@1``, ``Recall@5``, ... as fractions.
    Non-numeric cells (``"N/A"``) and methods without any value are left out.
    """
    ks = _cutoffs(metrics.columns, family)
    if not ks:
        raise ValueError(f"no {family}@K column in {list(metrics.columns)}")
    values = metrics[[f"{family}@{k}" for k in ks]].apply(pd.to_numeric, errors="coerce")
    with _style():
        fig = Figure(figsize=(5.0, 3.6), layout="constrained")
        ax = fig.add_subplot()
        for method, row in values.dropna(how="all").iterrows():
            ax.plot(ks, 100 * row.to_numpy(dtype=float), marker="o", label=str(method))
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.minorticks_off()
        ax.set(xlabel="K", ylabel=f"{family}@K (%)", title=dataset)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", loc="lower right")
        return _save(fig, path)


def paired_difference_figure(
    boot: pd.DataFrame, path: str | Path, *, metrics: list[str] | None = None
) -> Path:
    """Forest plot of reference-minus-best-comparator differences (percentage points).

    ``boot``: rows of :func:`evichain.metrics.bootstrap.bootstrap_table` (one or several
    datasets); only ``kind == "difference"`` rows are drawn. One panel per metric, one row per
    dataset: the point is the mean difference, the bar its 95% interval, the dashed line zero.
    """
    diffs = boot[boot["kind"] == "difference"]
    metrics = metrics or list(dict.fromkeys(diffs["metric"]))
    datasets = list(dict.fromkeys(diffs["dataset"]))
    with _style():
        size = (2.6 * max(len(metrics), 1) + 0.8, 0.55 * len(datasets) + 1.4)
        fig = Figure(figsize=size, layout="constrained")
        axes = fig.subplots(1, max(len(metrics), 1), sharey=True, squeeze=False)[0]
        for ax, metric in zip(axes, metrics, strict=False):
            _difference_panel(ax, diffs[diffs["metric"] == metric], datasets, metric)
        axes[0].set_yticks(range(len(datasets)), datasets)
        axes[0].invert_yaxis()
        fig.supxlabel("Difference (percentage points)", fontsize="medium")
        return _save(fig, path)


def sensitivity_figure(sweep: pd.DataFrame, path: str | Path, *, metric: str,
                       defaults: dict[str, float] | None = None) -> Path:
    """One panel per swept parameter: ``metric`` (in %) against the parameter's value.

    ``sweep``: rows of :func:`evichain.report.sensitivity.one_at_a_time` (``param``, ``value``,
    ``dataset``, ``method``, ``metric``, ``score``), one line per (dataset, method). The
    default value of each parameter (``defaults``) is marked with a dotted vertical line.
    """
    rows = sweep[sweep["metric"] == metric]
    params = list(dict.fromkeys(rows["param"]))
    if not params:
        raise ValueError(f"no sweep rows for metric {metric!r}")
    with _style():
        fig = Figure(figsize=(3.0 * len(params) + 0.6, 3.2), layout="constrained")
        axes = fig.subplots(1, len(params), sharey=True, squeeze=False)[0]
        for ax, param in zip(axes, params, strict=True):
            sub = rows[rows["param"] == param]
            for (ds, method), line in sub.groupby(["dataset", "method"], sort=True):
                line = line.sort_values("value")
                ax.plot(line["value"], 100 * line["score"], marker="o", label=f"{ds} {method}")
            if defaults and param in defaults:
                ax.axvline(defaults[param], color="grey", linestyle=":", linewidth=0.8)
            ax.set(xlabel=param.split(".")[-1], title=param)
            ax.grid(True, alpha=0.3)
        axes[0].set_ylabel(f"{metric} (%)")
        axes[-1].legend(fontsize="x-small", loc="best")
        return _save(fig, path)


def _difference_panel(ax: Axes, rows: pd.DataFrame, datasets: list[str], metric: str) -> None:
    """One metric: a point and horizontal CI bar per dataset, labelled with the comparator."""
    rows = rows.set_index("dataset")
    for y, ds in enumerate(datasets):
        if ds not in rows.index:
            continue
        r = rows.loc[ds]
        mean, low, high = (100 * float(r[c]) for c in ("mean", "ci_low", "ci_high"))
        ax.errorbar(mean, y, xerr=[[mean - low], [high - mean]], fmt="o", color="C0", capsize=3)
        ax.annotate(f"vs {r['comparator']}", (mean, y), xytext=(0, 7),
                    textcoords="offset points", ha="center", fontsize="x-small")  # fmt: skip
    ax.axvline(0.0, color="grey", linestyle="--", linewidth=0.8)
    ax.set_title(metric)
    ax.margins(y=0.3)
    ax.grid(True, axis="x", alpha=0.3)


def _cutoffs(columns: pd.Index, family: str) -> list[int]:
    """Sorted ``K`` of the ``<family>@K`` columns."""
    matches = (_AT_K.match(str(c)) for c in columns)
    return sorted(int(m["k"]) for m in matches if m and m["family"] == family)


@contextmanager
def _style() -> Iterator[None]:
    """matplotlib's default style plus the fixed rc settings above, restored on exit."""
    with matplotlib.style.context("default"), matplotlib.rc_context(_RC):
        yield


def _save(fig: Figure, path: str | Path) -> Path:
    """Render on an Agg canvas and write PNG atomically, without the Software metadata."""
    FigureCanvasAgg(fig)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": None})
    return Path(path)

