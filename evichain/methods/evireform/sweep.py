"""EviReform's one-at-a-time parameter sweep (paper §A.6, Fig. A.2, Tables A.8–A.10).

Configurations (:func:`sweep_configs`): the default (variant ``full``, the ``evireform`` block
as written) first, then for each parameter of ``evireform.sweep.swept`` in order, each of its
values that differs from the block's own, with every other setting as written. The default is
evaluated once; it is the point at its own value on every parameter's line.

LLM calls: with ``rounds: 1`` the selector (Listing 12) sees the question and the candidates,
and the reformulator (Listing 13) the question and E_q; α (Eq. 14), β (Eq. 11) and k_r (Eq. 10)
act after both, so their configurations send exactly the default's prompts and must replay its
answers with 0 model calls, failing only where the default failed (:func:`check_replay`: an
error otherwise; a question whose prompt the recording lacks fails in every configuration alike,
and is listed).
L (``max_residual_queries``) bounds Listing 13's schema (``maxItems``), so every other value of
L sends new reformulation prompts: one per Listing 13 call of the default
(:func:`reformulation_calls`), the selection answers being shared.

Statistics (:func:`sweep_summary`): per metric, the mean over the evaluated questions, its 95%
percentile bootstrap interval, and the paired difference against the default with its interval,
every configuration resampled with the same index matrix (:mod:`evichain.metrics.bootstrap`,
seed :func:`~evichain.metrics.bootstrap.seed_for` ``(dataset, metric)``).

Figure (:func:`sweep_figure`): Fig. A.2's line panels, one per parameter (x = its values), one
row per metric of ``figure_metrics`` (in %), 95% bootstrap intervals as error bars, the
default's value marked by a dashed vertical line, a red ring on each point whose paired
difference from the default has a 95% interval excluding 0, and n in the title.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.style
import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from evichain.io import atomic_path
from evichain.methods.evireform.params import EviReformParams, SweepParams
from evichain.methods.evireform.variants import variant_params
from evichain.metrics.bootstrap import (
    CONFIDENCE,
    N_RESAMPLES,
    Interval,
    aligned_values,
    bootstrap_ci,
    paired_difference_ci,
    resample_indices,
    seed_for,
)

VARIANT = "full"
"""The variant swept: the paper's configuration (``robust`` / ``hybrid`` replace k_r)."""

DEFAULT = "default"
"""``parameter`` and ``config`` of the default configuration."""

KEYS: tuple[str, ...] = ("alpha", "beta", "k_r", "max_residual_queries")
"""The swept settings, as config columns of the per-question table."""

LABELS: dict[str, str] = {"alpha": "α", "beta": "β", "k_r": "k_r", "max_residual_queries": "L"}
"""Axis names of the figure (the paper's symbols)."""

DIGITS = 6
"""Decimal places of the written statistics (the project's metrics files round to 6)."""

FIGURE_DPI = 150
_RC = {"svg.hashsalt": "evichain", "font.family": "DejaVu Sans", "path.simplify": True}


class SweepReplayError(RuntimeError):
    """A configuration that must replay the default's LLM answers called the model or missed."""


@dataclass(frozen=True)
class SweepConfig:
    """One configuration: ``parameter`` set to ``value`` (the default: ``"default"``, None)."""

    parameter: str
    value: float | int | None

    @property
    def label(self) -> str:
        """``default`` or ``<parameter>=<value>`` (the ``config`` column)."""
        return DEFAULT if self.parameter == DEFAULT else f"{self.parameter}={self.value:g}"


def sweep_configs(params: EviReformParams) -> list[SweepConfig]:
    """The default, then each swept parameter's values other than the block's own, in
    ``evireform.sweep`` order (module docstring)."""
    sweep: SweepParams = params.sweep
    configs = [SweepConfig(DEFAULT, None)]
    for key in sweep.swept:
        configs += [SweepConfig(key, v) for v in getattr(sweep, key) if v != getattr(params, key)]
    return configs


def config_params(params: EviReformParams, config: SweepConfig) -> EviReformParams:
    """The ``full`` settings of ``config``: the block with one parameter replaced (validated)."""
    if config.parameter == DEFAULT:
        return variant_params(params, VARIANT)
    if config.parameter not in KEYS:
        raise ValueError(f"unknown sweep parameter {config.parameter!r}; known: {list(KEYS)}")
    changed = EviReformParams.model_validate({**params.model_dump(), config.parameter: config.value})
    return variant_params(changed, VARIANT)


def config_values(params: EviReformParams, config: SweepConfig) -> dict[str, Any]:
    """The config columns of ``config``: its label, parameter, value and every swept setting."""
    chosen = config_params(params, config)
    return {"config": config.label, "parameter": config.parameter,
            "value": None if config.value is None else float(config.value),
            **{k: getattr(chosen, k) for k in KEYS}}


def replays(parameter: str, params: EviReformParams) -> bool:
    """Whether ``parameter``'s configurations send the default's prompts: α and β always, k_r
    with ``rounds: 1`` (later rounds read the passages k_r reached), L never."""
    return parameter in ("alpha", "beta") or (parameter == "k_r" and params.rounds == 1)


def check_replay(config: SweepConfig, params: EviReformParams, usage: Mapping[str, Any],
                 default_usage: Mapping[str, Any]) -> None:
    """Raise :class:`SweepReplayError` when a configuration of a replaying parameter made a
    model call, or had more failed requests than the default (a replay miss counts as one): its
    prompts are the default's, so every answer must come from the cache, and it may fail only
    where the default failed (e.g. a prompt the recording lacks)."""
    if not replays(config.parameter, params):
        return
    calls, failures = int(usage.get("calls", 0)), int(usage.get("failures", 0))
    allowed = int(default_usage.get("failures", 0))
    if calls or failures > allowed:
        raise SweepReplayError(
            f"sweep configuration {config.label} made {calls} model call(s) and {failures} failed "
            f"request(s) (the default: {allowed}); {config.parameter} changes nothing the LLM "
            "sees, so it must replay the default's answers with 0 calls (were they cached?)")


def failed_question_ids(traces: Sequence[Mapping[str, Any]]) -> list[str]:
    """Ids of the trace rows with a failed LLM step: a ``*_status`` field reading
    ``llm_<kind>`` (the rule of :func:`evichain.llm.failures.failed_questions`)."""
    return sorted(str(t["question_id"]) for t in traces
                  if any(k.endswith("_status") and str(v).startswith("llm_") for k, v in t.items()))


def reformulation_calls(trace: pl.DataFrame) -> int:
    """Listing 13/16 calls of one run: Σ ``rounds_used`` over its trace rows."""
    return int(trace["rounds_used"].sum())


def unrun_values(params: EviReformParams) -> dict[str, list[float | int]]:
    """Values of the parameters listed in ``evireform.sweep`` but not swept (other than the
    block's own)."""
    sweep = params.sweep
    return {k: [v for v in getattr(sweep, k) if v != getattr(params, k)]
            for k in KEYS if k not in sweep.swept and getattr(sweep, k)}


# --------------------------------------------------------------------------- statistics
def evaluated(table: pl.DataFrame, reliable_only: bool) -> pl.DataFrame:
    """The rows the statistics cover: all, or the gold-reliable ones (a null flag counts as
    reliable, as in the report) when ``reliable_only``."""
    if not reliable_only:
        return table
    if "gold_reliable" not in table.columns:
        raise ValueError("reliable-only statistics need the gold_reliable column of the questions")
    return table.filter(pl.col("gold_reliable").fill_null(True).cast(pl.Boolean))


def per_config(table: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Config label → its per-question rows, in the table's config order."""
    labels = list(dict.fromkeys(table["config"].to_list()))
    return {label: table.filter(pl.col("config") == label) for label in labels}


def _interval(ci: Interval) -> dict[str, float]:
    return {"mean": round(ci.mean, DIGITS), "ci_low": round(ci.low, DIGITS),
            "ci_high": round(ci.high, DIGITS)}


def metric_rows(table: pl.DataFrame, metric: str, dataset: str) -> tuple[list[dict[str, Any]], int, int]:
    """Per config: ``mean``/``ci_low``/``ci_high`` of ``metric`` and ``vs_default`` (the paired
    difference config − default, absent for the default); the question count and the seed."""
    tables = per_config(table)
    if DEFAULT not in tables:
        raise ValueError(f"the sweep table has no {DEFAULT!r} configuration to compare against")
    matrix = aligned_values(tables, metric)
    if matrix.height == 0:
        raise ValueError(f"metric {metric!r} is not a column of the sweep table")
    seed = seed_for(dataset, metric)
    indices = resample_indices(matrix.height, N_RESAMPLES, seed)
    base = matrix[DEFAULT].to_numpy()
    rows = []
    for label in tables:
        values = matrix[label].to_numpy()
        row: dict[str, Any] = {"config": label, **_interval(bootstrap_ci(values, indices=indices))}
        if label != DEFAULT:
            row["vs_default"] = _interval(paired_difference_ci(values, base, indices=indices))
        rows.append(row)
    return rows, matrix.height, seed


def sweep_summary(table: pl.DataFrame, params: EviReformParams, dataset: str,
                  usage: Mapping[str, Mapping[str, Any]], reliable_only: bool) -> dict[str, Any]:
    """The stage's JSON: per config its values, LLM usage and, per metric of
    ``evireform.sweep.metrics``, the mean, 95% bootstrap CI and paired difference against the
    default (module docstring); the question count, filter, seeds and defaults."""
    rows = evaluated(table, reliable_only)
    configs: dict[str, dict[str, Any]] = {}
    for label, part in per_config(rows).items():
        first = part.row(0, named=True)
        configs[label] = {**{k: first[k] for k in ("config", "parameter", "value", *KEYS)},
                          "llm_usage": dict(usage.get(label, {})), "scores": {}}
    seeds, counts = {}, set()
    for metric in params.sweep.metrics:
        metric_out, n, seeds[metric] = metric_rows(rows, metric, dataset)
        counts.add(n)
        for row in metric_out:
            configs[row.pop("config")]["scores"][metric] = row
    if len(counts) != 1:
        raise ValueError(f"the sweep's metrics cover different question counts: {sorted(counts)}")
    return {"dataset": dataset, "variant": VARIANT, "n_questions": counts.pop(),
            "question_filter": "gold_reliable" if reliable_only else "all",
            "defaults": {k: getattr(params, k) for k in KEYS}, "swept": list(params.sweep.swept),
            "bootstrap": {"n_resamples": N_RESAMPLES, "confidence": CONFIDENCE, "seeds": seeds},
            "configs": list(configs.values())}


# --------------------------------------------------------------------------- figure
@dataclass(frozen=True)
class LinePoint:
    """One point of a parameter's line: its value, the metric's interval, and whether the
    paired 95% interval against the default excludes 0 (never for the default itself)."""

    x: float
    ci: Interval
    differs: bool


def line_points(summary: Mapping[str, Any], parameter: str, metric: str) -> list[LinePoint]:
    """The points of ``metric`` along ``parameter``: its configurations and the default at the
    block's value, sorted by value."""
    default_value = float(summary["defaults"][parameter])
    points = []
    for cfg in summary["configs"]:
        if cfg["parameter"] in (parameter, DEFAULT):
            s = cfg["scores"][metric]
            x = default_value if cfg["parameter"] == DEFAULT else float(cfg["value"])
            diff = s.get("vs_default")
            differs = diff is not None and (diff["ci_low"] > 0 or diff["ci_high"] < 0)
            points.append(LinePoint(x, Interval(s["mean"], s["ci_low"], s["ci_high"]), differs))
    return sorted(points, key=lambda p: p.x)


def _panel(ax: Axes, points: Sequence[LinePoint], default: float, values: Sequence[float],
           note: str) -> None:
    """One parameter's line (in %) with CI bars, the points whose paired interval excludes 0
    ringed in red, the default dashed, ``note`` when not run."""
    xs = np.array([p.x for p in points])
    mean = np.array([100 * p.ci.mean for p in points])
    err = np.array([[100 * (p.ci.mean - p.ci.low) for p in points],
                    [100 * (p.ci.high - p.ci.mean) for p in points]])
    ax.errorbar(xs, mean, yerr=err, marker="o", markersize=4, capsize=3, linewidth=1.3, color="C0")
    marked = [i for i, p in enumerate(points) if p.differs]
    if marked:
        ax.plot(xs[marked], mean[marked], linestyle="", marker="o", markersize=9,
                markerfacecolor="none", markeredgecolor="C3", markeredgewidth=1.4)
    ax.axvline(default, color="grey", linestyle="--", linewidth=0.9)
    ticks = sorted({*values, default})
    if min(ticks) > 0 and max(ticks) / min(ticks) >= 4:
        ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    if note:
        ax.text(0.5, 0.06, note, transform=ax.transAxes, ha="center", va="bottom",
                fontsize="x-small", color="dimgrey")
    ax.grid(True, alpha=0.3)


def sweep_figure(summary: Mapping[str, Any], params: EviReformParams, path: str | Path,
                 not_run: Mapping[str, str] | None = None, failed: Sequence[str] = ()) -> Path:
    """Fig. A.2's line panels for one dataset (module docstring); ``not_run`` maps a parameter
    left out of the sweep to the note its panel shows; ``failed`` (questions whose default run
    had a failed LLM step) are counted in the title. Deterministic PNG (Agg, matplotlib's
    default style, no ``Software`` chunk)."""
    sweep, notes = params.sweep, dict(not_run or {})
    keys = [k for k in KEYS if k in sweep.swept or k in notes]
    metrics = list(sweep.figure_metrics)
    with matplotlib.style.context("default"), matplotlib.rc_context(_RC):
        fig = Figure(figsize=(2.9 * len(keys) + 0.6, 2.6 * len(metrics) + 0.7), layout="constrained")
        axes = fig.subplots(len(metrics), len(keys), squeeze=False, sharey="row")
        for row, metric in zip(axes, metrics, strict=True):
            for ax, key in zip(row, keys, strict=True):
                default = float(getattr(params, key))
                _panel(ax, line_points(summary, key, metric), default,
                       [float(v) for v in getattr(sweep, key)], notes.get(key, ""))
                ax.set_xlabel(LABELS[key])
            row[0].set_ylabel(f"{metric} (%)")
        failures = f", {len(failed)} with a failed LLM step in every configuration" if failed else ""
        fig.suptitle(f"EviReform {VARIANT}, one parameter at a time: {summary['dataset']} "
                     f"(n = {summary['n_questions']}{failures})\nbars: 95% bootstrap CI; red ring: "
                     "paired 95% CI of the difference from the default excludes 0; dashed: default",
                     fontsize="small")
        FigureCanvasAgg(fig)
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=FIGURE_DPI, metadata={"Software": None})
    return Path(path)


def not_run_note(values: Sequence[float | int], calls: int) -> str:
    """The panel note of a parameter left out: its values and the LLM calls they need."""
    shown = ", ".join(f"{v:g}" for v in values)
    return f"{shown}: not run\n(needs {calls} new LLM calls)"
