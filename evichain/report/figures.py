"""Deterministic PNG figures: Recall@K curves of the ranking methods grouped by family, paired
differences against a reference with bootstrap CIs (Figure A.1 shape, one row per dataset) and
one-parameter sensitivity lines from a ``dvc exp`` sweep.

Figures are drawn on an Agg canvas without ``pyplot`` (no global backend or figure state), under
matplotlib's default style (a user's ``matplotlibrc`` cannot change the output), and saved
without the ``Software`` PNG text chunk; the Agg PNG writer adds no timestamp, so the same input
gives the same bytes on the same matplotlib/freetype build.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import matplotlib
import matplotlib.style
import pandas as pd
import polars as pl
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from evichain.io import atomic_path
from evichain.metrics.frames import as_polars
from evichain.report import families as fam
from evichain.report.families import OURS

DPI = 150
_RC = {"svg.hashsalt": "evichain", "font.family": "DejaVu Sans", "path.simplify": True}
_LEGEND_ROWS = 22  # legend entries in one column beside a recall plot; more → two columns
_AT_K = re.compile(r"^(?P<family>.+)@(?P<k>\d+)$")


def recall_at_k_figure(
    metrics: pd.DataFrame, path: str | Path, *, dataset: str, family: str = "Recall",
    ours: Sequence[str] = OURS,
) -> Path:
    """Line plot of ``<family>@K`` (in %) against ``K``, one line per ranking method.

    ``metrics``: index = method, columns include ``Recall@1``, ``Recall@5``, ... as fractions.
    Non-numeric cells (``"N/A"``) and methods without any value are left out, and so are the
    iterative methods (:data:`~evichain.report.families.ITERATIVE`: they return evidence sets,
    not rankings). Methods are grouped by family: one colour per family, a line style and
    marker per method (:func:`~evichain.report.families.style`); the legend, headed by family,
    sits to the right of the axes so it never covers a line.
    """
    ks = _cutoffs(metrics.columns, family)
    if not ks:
        raise ValueError(f"no {family}@K column in {list(metrics.columns)}")
    values = metrics[[f"{family}@{k}" for k in ks]].apply(pd.to_numeric, errors="coerce")
    values = values.dropna(how="all")
    values.index = values.index.map(str)
    methods = fam.ordered(fam.ranking_methods([str(m) for m in values.index]), ours)
    n_entries = len(methods) + len({fam.family(m, ours) for m in methods})
    with _style():
        fig = Figure(figsize=(6.8 + (2.4 if n_entries > _LEGEND_ROWS else 0.0), 4.6),
                     layout="constrained")
        ax = fig.add_subplot()
        handles: list[tuple[object, str]] = []
        current = None
        for method in methods:
            group = fam.family(method, ours)
            if group != current:
                handles.append((_header_handle(), fam.LABEL[group]))
                current = group
            (line,) = ax.plot(ks, 100 * values.loc[method].to_numpy(dtype=float), label=method,
                              linewidth=1.4, markersize=4.5, **fam.style(method, ours))
            handles.append((line, method))
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.minorticks_off()
        ax.set(xlabel="K (passages retrieved)", ylabel=f"{family}@K (%)",
               title=f"{family}@K on {dataset}")
        ax.grid(True, alpha=0.3)
        if not methods:
            ax.text(0.5, 0.5, "no ranking method evaluated", transform=ax.transAxes,
                    ha="center", va="center", color="grey")
        if handles:
            _family_legend(fig, ax, handles, loc="outside right upper")
        return _save(fig, path)


def paired_difference_figure(
    diffs: pl.DataFrame | pd.DataFrame, path: str | Path, *, metrics: Sequence[str] | None = None,
    ours: Sequence[str] = OURS,
) -> Path:
    """Forest plot of every method's paired difference against a reference (points).

    ``diffs``: rows of :func:`evichain.report.differences.reference_differences` (``dataset``,
    ``method``, ``reference``, ``metric``, ``n``, ``difference``, ``ci_low``, ``ci_high``, in
    points), one or several datasets. One row of panels per dataset, one panel per metric: a
    point per method (family colour and marker) at the mean difference, its 95% bootstrap
    interval as a bar, the dashed line at zero; methods ordered by family.
    """
    diffs = as_polars(diffs)
    if diffs.height == 0:
        raise ValueError("no paired differences to draw")
    metrics = list(metrics or dict.fromkeys(diffs["metric"].to_list()))
    datasets = list(dict.fromkeys(diffs["dataset"].to_list()))
    per_ds = {ds: fam.ordered(diffs.filter(pl.col("dataset") == ds)["method"].cast(pl.String).to_list(),
                              ours) for ds in datasets}
    heights = [max(len(per_ds[ds]), 2) + 1.6 for ds in datasets]
    with _style():
        fig = Figure(figsize=(3.3 * len(metrics) + 2.4, 0.24 * sum(heights) + 0.9),
                     layout="constrained")
        axes = fig.subplots(len(datasets), len(metrics), squeeze=False, sharex="col",
                            gridspec_kw={"height_ratios": heights})
        for row, ds in zip(axes, datasets, strict=True):
            rows = diffs.filter(pl.col("dataset") == ds)
            ref = str(rows["reference"][0])
            n = sorted({int(v) for v in rows["n"]})
            n_text = f"n = {n[0]}" if len(n) == 1 else f"n = {n[0]}–{n[-1]}"
            for ax, metric in zip(row, metrics, strict=True):
                _difference_panel(ax, rows.filter(pl.col("metric") == metric), per_ds[ds], ours)
                ax.set_title(f"{ds}: {metric}, method − {ref} ({n_text})", fontsize="small")
            row[0].set_yticks(range(len(per_ds[ds])), per_ds[ds], fontsize="small")
            for ax in row[1:]:
                ax.set_yticks(range(len(per_ds[ds])), [""] * len(per_ds[ds]))
        for ax in axes[-1]:
            ax.set_xlabel("Paired difference (percentage points), 95% bootstrap CI", fontsize="small")
        groups = sorted({fam.family(m, ours) for ms in per_ds.values() for m in ms},
                        key=fam.FAMILIES.index)
        legend = [(Line2D([], [], color=fam.COLOUR[g], marker="o", linestyle=""), fam.LABEL[g])
                  for g in groups]
        fig.legend([h for h, _ in legend], [t for _, t in legend], loc="outside lower center",
                   ncols=min(len(legend), 4), fontsize="small", frameon=False)
        return _save(fig, path)


def sensitivity_figure(sweep: pl.DataFrame | pd.DataFrame, path: str | Path, *, metric: str,
                       defaults: dict[str, float] | None = None) -> Path:
    """One panel per swept parameter: ``metric`` (in %) against the parameter's value.

    ``sweep``: rows of :func:`evichain.report.sensitivity.one_at_a_time` (``param``, ``value``,
    ``dataset``, ``method``, ``metric``, ``score``), one line per (dataset, method). The
    default value of each parameter (``defaults``) is marked with a dotted vertical line.
    """
    rows = as_polars(sweep).filter(pl.col("metric") == metric)
    params = list(dict.fromkeys(rows["param"].to_list()))
    if not params:
        raise ValueError(f"no sweep rows for metric {metric!r}")
    with _style():
        fig = Figure(figsize=(3.0 * len(params) + 0.6, 3.2), layout="constrained")
        axes = fig.subplots(1, len(params), sharey=True, squeeze=False)[0]
        for ax, param in zip(axes, params, strict=True):
            sub = rows.filter(pl.col("param") == param)
            for (ds, method), line in sorted(sub.group_by(["dataset", "method"]), key=lambda g: g[0]):
                line = line.sort("value", maintain_order=True)
                ax.plot(line["value"].to_numpy(), 100 * line["score"].to_numpy(), marker="o",
                        label=f"{ds} {method}")
            if defaults and param in defaults:
                ax.axvline(defaults[param], color="grey", linestyle=":", linewidth=0.8)
            ax.set(xlabel=param.split(".")[-1], title=param)
            ax.grid(True, alpha=0.3)
        axes[0].set_ylabel(f"{metric} (%)")
        axes[-1].legend(fontsize="x-small", loc="best")
        return _save(fig, path)


def _difference_panel(ax: Axes, rows: pl.DataFrame, methods: list[str], ours: Sequence[str]) -> None:
    """One dataset and metric: a point and horizontal CI bar per method (family colour)."""
    by_method = {str(r["method"]): r for r in rows.iter_rows(named=True)}
    for y, method in enumerate(methods):
        if method not in by_method:
            continue
        r = by_method[method]
        mean, low, high = (float(r[c]) for c in ("difference", "ci_low", "ci_high"))
        st = fam.style(method, ours)
        ax.errorbar(mean, y, xerr=[[mean - low], [high - mean]], fmt=str(st["marker"]),
                    color=str(st["color"]), markersize=4.5, capsize=2.5, linewidth=1.2)
    ax.axvline(0.0, color="grey", linestyle="--", linewidth=0.8)
    ax.set_ylim(len(methods) - 0.5, -0.5)
    ax.grid(True, axis="x", alpha=0.3)


def _header_handle() -> Line2D:
    """An invisible legend handle: the entry's text is a family heading (set in bold)."""
    handle = Line2D([], [], linestyle="", marker="")
    handle.evichain_header = True  # type: ignore[attr-defined]
    return handle


def _family_legend(fig: Figure, ax: Axes, handles: list[tuple[object, str]], loc: str) -> None:
    """Legend outside the axes, family headings in bold and their methods indented below."""
    ncols = 1 if len(handles) <= _LEGEND_ROWS else 2
    legend = fig.legend([h for h, _ in handles], [t for _, t in handles], loc=loc, ncols=ncols,
                        fontsize="x-small", frameon=False, handlelength=2.6,
                        handletextpad=0.5, borderaxespad=0.2)
    for (handle, _), text in zip(handles, legend.get_texts(), strict=True):
        if getattr(handle, "evichain_header", False):
            text.set_fontweight("bold")


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

