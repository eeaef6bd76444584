"""Deterministic PNG figures: Recall@K curves of the ranking methods, one panel per family, paired
differences against a reference with bootstrap CIs (Figure A.1 shape, one row per dataset) and
one-parameter sensitivity lines from a ``dvc exp`` sweep. The report draws no Recall@K or
paired-difference figure on fewer than :data:`MIN_FIGURE_QUESTIONS` questions, and every panel
title states its n.

Figures are drawn on an Agg canvas without ``pyplot`` (no global backend or figure state), under
matplotlib's default style (a user's ``matplotlibrc`` cannot change the output), and saved
without the ``Software`` PNG text chunk; the Agg PNG writer adds no timestamp, so the same input
gives the same bytes on the same matplotlib/freetype build.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import matplotlib
import matplotlib.style
import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from evichain.io import atomic_path
from evichain.report import families as fam
from evichain.report.families import OURS

DPI = 150
_RC = {"svg.hashsalt": "evichain", "font.family": "DejaVu Sans", "path.simplify": True}
_PANEL_COLUMNS = 4  # family panels per row of a Recall@K figure

MIN_FIGURE_QUESTIONS = 30
"""No figure is drawn on fewer questions (issue 63, item 6): on the 4-question demo every
interval is a step of whole questions and the curves are flat lines, not evidence."""
_AT_K = re.compile(r"^(?P<family>.+)@(?P<k>\d+)$")


def recall_at_k_figure(
    metrics: pl.DataFrame, path: str | Path, *, dataset: str, n_questions: Mapping[str, int],
    family: str = "Recall", ours: Sequence[str] = OURS, reference: str | None = None,
    min_questions: int = MIN_FIGURE_QUESTIONS,
) -> Path:
    """``<family>@K`` (in %) against ``K``: one panel per method family, one line per method.

    ``metrics``: the methods in the first column, then columns that include ``Recall@1``,
    ``Recall@5``, ... as fractions (:func:`evichain.report.retrieval_report.metrics_frame`);
    ``n_questions``: method → questions it was evaluated on (every panel title states its n, so
    does the figure's title). Non-numeric cells (``"N/A"``) and methods without any value are
    left out, and so are the methods of :data:`~evichain.report.families.UNRANKED` (no passage
    ranking). Panels follow the family order, share the y axis, and draw each family in its
    colour, its methods told apart by line style and marker
    (:func:`~evichain.report.families.style`), legend below each panel; ``reference`` (the
    strongest baseline) is repeated as a thin dotted line in its family colour in the other
    panels. A method
    evaluated on fewer than ``min_questions`` questions is a ``ValueError``: drop it first
    (:func:`drawable_methods`).
    """
    ks = _cutoffs(metrics.columns[1:], family)
    if not ks:
        raise ValueError(f"no {family}@K column in {metrics.columns[1:]}")
    values = _numeric_rows(metrics, [f"{family}@{k}" for k in ks])
    methods = fam.ordered(fam.ranking_methods(list(values)), ours)
    if not methods:
        raise ValueError(f"no ranking method with {family}@K values on {dataset}")
    few = sorted(m for m in methods if n_questions.get(m, 0) < min_questions)
    if few:
        raise ValueError(f"{', '.join(few)} on {dataset}: fewer than {min_questions} questions "
                         "(or no count); leave them out of the figure")
    groups = list(dict.fromkeys(fam.family(m, ours) for m in methods))
    ncols = min(len(groups), _PANEL_COLUMNS)
    nrows = -(-len(groups) // ncols)
    with _style():
        fig = Figure(figsize=(3.3 * ncols + 0.4, 3.6 * nrows + 0.5), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
        for ax, group in zip(axes.flat, groups, strict=False):
            members = [m for m in methods if fam.family(m, ours) == group]
            if reference in values and reference not in members:
                ax.plot(ks, 100 * values[reference], linestyle=(0, (1, 1)),
                        color=fam.COLOUR[fam.family(reference, ours)], linewidth=1.0, alpha=0.8,
                        label=f"{reference} (strongest baseline)")
            for method in members:
                ax.plot(ks, 100 * values[method], label=method,
                        linewidth=1.4, markersize=4.0, **fam.style(method, ours))
            ax.set_title(f"{fam.LABEL[group]} ({_n_text([n_questions[m] for m in members])})",
                         fontsize="small", color=fam.COLOUR[group])
            ax.set_xscale("log", base=2)
            ax.set_xticks(ks, [str(k) for k in ks])
            ax.minorticks_off()
            ax.set_xlabel("K (passages retrieved)", fontsize="x-small")
            ax.grid(True, alpha=0.3)
            # Below the axes, so it never covers a line.
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=1 if len(members) < 3 else 2,
                      fontsize="xx-small", frameon=False, handlelength=2.6, columnspacing=1.0)
        for ax in axes.flat[len(groups):]:
            ax.set_axis_off()
        for ax in axes[:, 0]:
            ax.set_ylabel(f"{family}@K (%)", fontsize="small")
        fig.suptitle(f"{family}@K on {dataset} ({_n_text([n_questions[m] for m in methods])}), "
                     "one panel per method family", fontsize="medium")
        return _save(fig, path)


def drawable_methods(n_questions: Mapping[str, int], min_questions: int = MIN_FIGURE_QUESTIONS
                     ) -> list[str]:
    """The methods evaluated on at least ``min_questions`` questions, in the given order."""
    return [m for m, n in n_questions.items() if n >= min_questions]


def paired_difference_figure(
    diffs: pl.DataFrame, path: str | Path, *, metrics: Sequence[str] | None = None,
    ours: Sequence[str] = OURS, min_questions: int = MIN_FIGURE_QUESTIONS, title: str = "",
) -> Path:
    """Forest plot of every method's paired difference against its dataset's reference (points).

    ``diffs``: rows of :func:`evichain.report.differences.difference_frame` (``dataset``,
    ``method``, ``reference``, ``metric``, ``n``, ``difference``, ``ci_low``, ``ci_high``, in
    points), one or several datasets. One row of panels per dataset, one panel per metric: a
    point per method (family colour and marker) at the mean difference, its 95% bootstrap
    interval as a bar, the dashed line at zero; methods ordered by family; each panel's title
    names the dataset, metric, reference and n; ``title`` (how the references were chosen)
    heads the figure. A row computed on fewer than ``min_questions`` questions is a
    ``ValueError`` (filter with :func:`evichain.report.differences.drawable`).
    """
    if diffs.height == 0:
        raise ValueError("no paired differences to draw")
    few = diffs.filter(pl.col("n") < min_questions)
    if few.height:
        raise ValueError(f"paired differences on fewer than {min_questions} questions: "
                         f"{sorted(set(few['dataset'].cast(pl.String).to_list()))}; filter them first")
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
            for ax, metric in zip(row, metrics, strict=True):
                cell = rows.filter(pl.col("metric") == metric)
                _difference_panel(ax, cell, per_ds[ds], ours)
                n_text = _n_text([int(v) for v in cell["n"]]) if cell.height else "no rows"
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
        if title:
            fig.suptitle(title, fontsize="medium")
        return _save(fig, path)


def sensitivity_figure(sweep: pl.DataFrame, path: str | Path, *, metric: str,
                       defaults: dict[str, float] | None = None) -> Path:
    """One panel per swept parameter: ``metric`` (in %) against the parameter's value.

    ``sweep``: rows of :func:`evichain.report.sensitivity.one_at_a_time` (``param``, ``value``,
    ``dataset``, ``method``, ``metric``, ``score``), one line per (dataset, method). The
    default value of each parameter (``defaults``) is marked with a dotted vertical line.
    """
    rows = sweep.filter(pl.col("metric") == metric)
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


def _n_text(counts: Sequence[int]) -> str:
    """``n = 100``, or ``n = 40–100`` when the counts differ."""
    low, high = min(counts), max(counts)
    return f"n = {low}" if low == high else f"n = {low}–{high}"


def _cutoffs(columns: Sequence[str], family: str) -> list[int]:
    """Sorted ``K`` of the ``<family>@K`` columns."""
    matches = (_AT_K.match(str(c)) for c in columns)
    return sorted(int(m["k"]) for m in matches if m and m["family"] == family)


def _numeric_rows(table: pl.DataFrame, columns: Sequence[str]) -> dict[str, np.ndarray]:
    """Row label (first column, as text) → its ``columns`` as a float array, a cell that is no
    number NaN (:func:`_number`); rows without any number left out."""
    labels = [str(v) for v in table[table.columns[0]].to_list()]
    cells = [[_number(v) for v in table[c].to_list()] for c in columns]
    matrix = np.array(cells, dtype=float).reshape(len(columns), len(labels)).T
    return {m: row for m, row in zip(labels, matrix, strict=True) if not np.isnan(row).all()}


def _number(value: object) -> float:
    """A cell as a float: numbers as they are, numeric text parsed, anything else (``"N/A"``,
    ``"N/E"``, null) NaN."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return math.nan
    return math.nan


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

