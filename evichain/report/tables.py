"""Markdown and CSV tables of metrics (methods × metrics), paper style.

Input: a DataFrame whose index holds method names and whose columns are metrics; cells are
fractions in [0, 1] (shown as percentages with ``decimals`` places) or strings such as ``"N/A"``
(not applicable, e.g. recall of a method without a passage ranking) or ``"N/E"`` (not
evaluated), which are passed through unchanged and never ranked. NaN renders as ``"N/A"``.

Per column, the cells whose *displayed* value is the best are bold (``**x**``) and those with
the second-best displayed value are underlined (``<u>x</u>``); ties share the mark. Higher is
better unless the column is listed in ``lower_is_better``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

import pandas as pd
import polars as pl

from evichain.io import write_text
from evichain.metrics.frames import as_polars

METRIC_DEFINITIONS: dict[str, str] = {
    "Recall@K": "mean over questions of |G ∩ R_K| / |G| (gold passages G, top-K ranking R_K)",
    "Chain@K": "mean of 1[G ⊆ R_K]: the complete gold chain is in the top K (FSR@K)",
    "Hit@K": "mean of 1[G ∩ R_K ≠ ∅]: at least one gold passage is in the top K",
    "MAP@10": "trec_eval map_cut_10: Σ_{i≤10, d_i∈G} P@i / |G| (denominator |G|)",
    "nDCG@10": "trec_eval ndcg_cut_10: binary gains, 1/log2(i+1) discount, ideal DCG@10",
    "EM": "normalized exact match (lower-case, no punctuation/articles), max over aliases",
    "F1": "normalized token-multiset F1, max over aliases; yes/no/noanswer mismatch = 0",
}


def format_cells(
    df: pd.DataFrame,
    *,
    percent: bool = True,
    decimals: int = 2,
    lower_is_better: Collection[str] = (),
    markup: bool = True,
) -> pd.DataFrame:
    """String version of ``df``: numbers formatted (×100 if ``percent``), best/second marked."""
    out = pd.DataFrame(index=df.index, columns=df.columns, dtype=object)
    for col in df.columns:
        shown = [_display(v, percent, decimals) for v in df[col]]
        marks = _marks(shown, lower=col in lower_is_better) if markup else [""] * len(shown)
        out[col] = [_markup(s, m, decimals) for s, m in zip(shown, marks, strict=True)]
    return out


def render_markdown(
    df: pd.DataFrame,
    *,
    index_name: str = "Method",
    percent: bool = True,
    decimals: int = 2,
    lower_is_better: Collection[str] = (),
) -> str:
    """GitHub Markdown table of ``df`` (see module docstring), ending with a newline."""
    cells = format_cells(
        df, percent=percent, decimals=decimals, lower_is_better=lower_is_better
    )
    header = [index_name, *map(str, df.columns)]
    body = [[str(i), *row] for i, row in zip(df.index, cells.itertuples(index=False), strict=True)]
    return _markdown(header, body, align=["---", *["---:"] * len(df.columns)])


def render_csv(df: pd.DataFrame, *, percent: bool = True, decimals: int = 2) -> str:
    """CSV of the displayed values (no markup, N/A passthrough), ``\\n`` line endings."""
    cells = format_cells(df, percent=percent, decimals=decimals, markup=False)
    cells.index.name = df.index.name or "method"
    return cells.to_csv(lineterminator="\n")


def write_markdown(df: pd.DataFrame, path: str | Path, **kwargs: object) -> Path:
    """Atomically write :func:`render_markdown` output (kwargs passed through)."""
    return write_text(render_markdown(df, **kwargs), path)  # type: ignore[arg-type]


def write_csv(df: pd.DataFrame, path: str | Path, **kwargs: object) -> Path:
    """Atomically write :func:`render_csv` output (kwargs passed through)."""
    return write_text(render_csv(df, **kwargs), path)  # type: ignore[arg-type]


def definitions_markdown(metrics: Iterable[str]) -> str:
    """Bullet list defining each metric column (``Recall@5`` → the ``Recall@K`` entry)."""
    lines = []
    for metric in metrics:
        family = metric.split("@")[0] + "@K"
        key = metric if metric in METRIC_DEFINITIONS else family
        if key in METRIC_DEFINITIONS:
            lines.append(f"- **{metric}**: {METRIC_DEFINITIONS[key]}")
    return "\n".join(lines) + ("\n" if lines else "")


def render_bootstrap_markdown(
    boot: pl.DataFrame | pd.DataFrame, *, reference_label: str | None = None, decimals: int = 2
) -> str:
    """EviReform Table A.1 layout from :func:`evichain.metrics.bootstrap.bootstrap_table` rows.

    Per dataset three rows: the reference method ``mean [low, high]``, the best metric-wise
    comparator ``name mean``, and the paired difference ``+d [+low, +high]`` (percentage points).
    """
    boot = as_polars(boot)
    metrics = list(dict.fromkeys(boot["metric"].to_list()))
    body = []
    for dataset in dict.fromkeys(boot["dataset"].to_list()):
        block = boot.filter(pl.col("dataset") == dataset)
        diff_rows = block.filter(pl.col("kind") == "difference").to_dicts()
        if not diff_rows:
            continue
        method = str(diff_rows[0]["method"])
        diffs = {str(r["metric"]): r for r in diff_rows}
        scores = {str(r["metric"]): r for r in block.filter(
            (pl.col("kind") == "score") & (pl.col("method") == method)).to_dicts()}
        ref = reference_label or method
        body.append([str(dataset), f"{ref} [95% CI]",
                     *[_ci_text(scores, m, decimals, signed=False) for m in metrics]])  # fmt: skip
        body.append(["", "Best metric-wise comparator",
                     *[_comparator_text(diffs, m, decimals) for m in metrics]])  # fmt: skip
        body.append(["", "Difference [95% CI]",
                     *[_ci_text(diffs, m, decimals, signed=True) for m in metrics]])  # fmt: skip
    header = ["Dataset", "Method or statistic", *metrics]
    return _markdown(header, body, align=["---", "---", *["---:"] * len(metrics)])


def render_plain_markdown(df: pl.DataFrame | pd.DataFrame, *, index_name: str | None = None) -> str:
    """Markdown of ``df`` with cells as they are (no scaling, no marks; null/NaN/None → empty);
    with ``index_name``, the row labels first under that name (a polars frame's first column, a
    pandas frame's index); numeric columns right-aligned, others left-aligned; no trailing
    newline."""
    labels, columns = _labelled_columns(df, index_name is not None)
    header = ([index_name] if index_name else []) + list(columns)
    align = (["---"] if index_name else []) + ["---:" if _numeric(v) else "---" for v in columns.values()]
    rows = zip(*columns.values(), strict=True) if columns else ([] for _ in labels)
    body = [([str(i)] if index_name else []) + ["" if _missing(v) else str(v) for v in row]
            for i, row in zip(labels, rows, strict=True)]
    return "\n".join([_row(header), _row(align), *(_row(r) for r in body)])


def _labelled_columns(df: pl.DataFrame | pd.DataFrame, labelled: bool
                      ) -> tuple[list[object], dict[str, list[object]]]:
    """Row labels and column name → cells: a polars frame's first column is the labels when
    ``labelled``; a pandas frame's labels are its index (pandas tables of callers not yet
    migrated)."""
    if isinstance(df, pl.DataFrame):
        data = df[:, 1:] if labelled else df
        labels = df[:, 0].to_list() if labelled else list(range(df.height))
        return labels, {c: data[c].to_list() for c in data.columns}
    return list(df.index), {str(c): list(df[c]) for c in df.columns}


def ci_text(mean: float, low: float, high: float, decimals: int = 2, signed: bool = False) -> str:
    """``mean [low, high]`` in fixed point (signed: ``+d [+l, +h]``; no "-0.00")."""
    mid, lo, hi = (_fmt(v, decimals, signed) for v in (mean, low, high))
    return f"{mid} [{lo}, {hi}]"


# --- helpers ------------------------------------------------------------------------------------


def _numeric(column: Iterable[object]) -> bool:
    """Every present cell is a number (bools and strings are not)."""
    present = [v for v in column if not _missing(v)]
    return bool(present) and all(isinstance(v, numbers.Number) and not isinstance(v, bool) for v in present)


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _display(value: object, percent: bool, decimals: int) -> str | float:
    """A number rounded for display (float) or a passthrough string."""
    if isinstance(value, str):
        return value
    if _missing(value):
        return "N/A"
    number = float(value) * (100 if percent else 1)  # type: ignore[arg-type]
    return round(number, decimals) + 0.0  # + 0.0 turns -0.0 into 0.0


def _marks(shown: list[str | float], lower: bool) -> list[str]:
    """``"best"``/``"second"``/``""`` per cell, comparing displayed numbers only."""
    distinct = sorted({v for v in shown if isinstance(v, float)}, reverse=not lower)
    rank = {v: ("best" if i == 0 else "second") for i, v in enumerate(distinct[:2])}
    return [rank.get(v, "") if isinstance(v, float) else "" for v in shown]


def _markup(value: str | float, mark: str, decimals: int) -> str:
    """Cell text with its mark: ``**x**`` (best), ``<u>x</u>`` (second) or plain."""
    text = value if isinstance(value, str) else _fmt(value, decimals)
    return {"best": f"**{text}**", "second": f"<u>{text}</u>"}.get(mark, text)


def _fmt(value: float, decimals: int, signed: bool = False) -> str:
    """Fixed-point text with ``decimals`` places (a leading sign when ``signed``; no "-0.00")."""
    value = round(value, decimals) + 0.0
    return f"{value:+.{decimals}f}" if signed else f"{value:.{decimals}f}"


def _ci_text(rows: Mapping[str, Mapping[str, object]], metric: str, decimals: int, signed: bool) -> str:
    if metric not in rows:
        return "N/A"
    r = rows[metric]
    return ci_text(*(100 * float(r[c]) for c in ("mean", "ci_low", "ci_high")), decimals, signed)  # type: ignore[arg-type]


def _comparator_text(diffs: Mapping[str, Mapping[str, object]], metric: str, decimals: int) -> str:
    if metric not in diffs:
        return "N/A"
    r = diffs[metric]
    return f"{r['comparator']} {_fmt(100 * float(r['comparator_mean']), decimals)}"  # type: ignore[arg-type]


def _markdown(header: list[str], body: list[list[str]], align: list[str]) -> str:
    lines = [_row(header), _row(align), *(_row(r) for r in body)]
    return "\n".join(lines) + "\n"


def _row(cells: Iterable[object]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"
