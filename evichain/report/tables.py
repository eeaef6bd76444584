"""Markdown and CSV tables of metrics (methods × metrics), paper style.

Input: a polars DataFrame whose first column holds the row labels (method names) and whose other
columns are metrics (:func:`labelled_frame` builds one from row dicts); cells are fractions in
[0, 1] (shown as percentages with ``decimals`` places) or strings such as ``"N/A"`` (not
applicable, e.g. recall of a method without a passage ranking) or ``"N/E"`` (not evaluated),
which are passed through unchanged and never ranked; a column mixing the two has dtype
``pl.Object``. null and NaN render as ``"N/A"``.

Per column, the cells whose *displayed* value is the best are bold (``**x**``) and those with
the second-best displayed value are underlined (``<u>x</u>``); ties share the mark. Higher is
better unless the column is listed in ``lower_is_better``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path

import polars as pl

from evichain.io import write_text

METRIC_DEFINITIONS: dict[str, str] = {
    "Recall@K": "mean over questions of |G ∩ R_K| / |G| (gold passages G, top-K ranking R_K)",
    "Chain@K": "mean of 1[G ⊆ R_K]: the complete gold chain is in the top K (FSR@K)",
    "Hit@K": "mean of 1[G ∩ R_K ≠ ∅]: at least one gold passage is in the top K",
    "MAP@10": "trec_eval map_cut_10: Σ_{i≤10, d_i∈G} P@i / |G| (denominator |G|)",
    "nDCG@10": "trec_eval ndcg_cut_10: binary gains, 1/log2(i+1) discount, ideal DCG@10",
    "EM": "normalized exact match (lower-case, no punctuation/articles), max over aliases",
    "F1": "normalized token-multiset F1, max over aliases; yes/no/noanswer mismatch = 0",
}


def labelled_frame(rows: Mapping[str, Mapping[str, object]], *, label: str = "method",
                   columns: Sequence[str] | None = None) -> pl.DataFrame:
    """Row label → {column: cell} as a table of this module: the labels first (String column
    ``label``), then ``columns`` (default: every row's columns in order of first appearance), a
    cell a row lacks null; a column whose cells share no polars dtype (numbers beside ``"N/A"``
    or ``"N/E"``) is ``pl.Object``, holding the cells as they are."""
    names = list(columns) if columns is not None else list(dict.fromkeys(c for r in rows.values() for c in r))
    series = [pl.Series(label, list(rows), dtype=pl.String)]
    series += [_series(name, [r.get(name) for r in rows.values()]) for name in names]
    return pl.DataFrame(series)


def _series(name: str, cells: list[object]) -> pl.Series:
    """``cells`` in the polars dtype they share (integers beside floats: Float64), ``pl.Object``
    when they share none."""
    try:
        return pl.Series(name, cells)
    except (TypeError, pl.exceptions.PolarsError):
        if _numeric(cells):
            return pl.Series(name, cells, dtype=pl.Float64, strict=False)
        return pl.Series(name, cells, dtype=pl.Object)


def format_cells(
    df: pl.DataFrame,
    *,
    percent: bool = True,
    decimals: int = 2,
    lower_is_better: Collection[str] = (),
    markup: bool = True,
) -> pl.DataFrame:
    """String version of ``df``: the labels as they are, numbers formatted (×100 if
    ``percent``), best/second marked."""
    cells = _formatted(_labelled_columns(df, True)[1], percent, decimals, lower_is_better, markup)
    return df.select(df.columns[0]).with_columns(pl.Series(c, v, dtype=pl.String) for c, v in cells.items())


def render_markdown(
    df: pl.DataFrame,
    *,
    index_name: str = "Method",
    percent: bool = True,
    decimals: int = 2,
    lower_is_better: Collection[str] = (),
) -> str:
    """GitHub Markdown table of ``df`` (see module docstring), ending with a newline."""
    labels, columns = _labelled_columns(df, True)
    cells = _formatted(columns, percent, decimals, lower_is_better, markup=True)
    header = [index_name, *cells]
    rows = zip(*cells.values(), strict=True) if cells else ([] for _ in labels)
    body = [[str(i), *row] for i, row in zip(labels, rows, strict=True)]
    return _markdown(header, body, align=["---", *["---:"] * len(cells)])


def render_csv(df: pl.DataFrame, *, percent: bool = True, decimals: int = 2) -> str:
    """CSV of the displayed values (no markup, N/A passthrough), ``\\n`` line endings; the
    labels first, under the first column's name."""
    labels, columns = _labelled_columns(df, True)
    cells = _formatted(columns, percent, decimals, (), markup=False)
    table = pl.DataFrame([pl.Series(df.columns[0], [str(i) for i in labels], dtype=pl.String),
                          *(pl.Series(c, v, dtype=pl.String) for c, v in cells.items())])
    return table.write_csv(line_terminator="\n")


def write_markdown(df: pl.DataFrame, path: str | Path, **kwargs: object) -> Path:
    """Atomically write :func:`render_markdown` output (kwargs passed through)."""
    return write_text(render_markdown(df, **kwargs), path)  # type: ignore[arg-type]


def write_csv(df: pl.DataFrame, path: str | Path, **kwargs: object) -> Path:
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
    boot: pl.DataFrame, *, reference_label: str | None = None, decimals: int = 2
) -> str:
    """EviReform Table A.1 layout from :func:`evichain.metrics.bootstrap.bootstrap_table` rows.

    Per dataset three rows: the reference method ``mean [low, high]``, the best metric-wise
    comparator ``name mean``, and the paired difference ``+d [+low, +high]`` (percentage points).
    """
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


def render_plain_markdown(df: pl.DataFrame, *, index_name: str | None = None) -> str:
    """Markdown of ``df`` with cells as they are (no scaling, no marks; null/NaN/None → empty);
    with ``index_name``, the row labels (the first column) first under that name; numeric
    columns right-aligned, others left-aligned; no trailing newline."""
    labels, columns = _labelled_columns(df, index_name is not None)
    header = ([index_name] if index_name else []) + list(columns)
    align = (["---"] if index_name else []) + ["---:" if _numeric(v) else "---" for v in columns.values()]
    rows = zip(*columns.values(), strict=True) if columns else ([] for _ in labels)
    body = [([str(i)] if index_name else []) + ["" if _missing(v) else str(v) for v in row]
            for i, row in zip(labels, rows, strict=True)]
    return "\n".join([_row(header), _row(align), *(_row(r) for r in body)])


def _labelled_columns(df: pl.DataFrame, labelled: bool) -> tuple[list[object], dict[str, list[object]]]:
    """Row labels and column name → cells (as Python values): the first column is the labels
    when ``labelled``, the row numbers otherwise."""
    names = df.columns[1:] if labelled else df.columns
    labels = df[df.columns[0]].to_list() if labelled else list(range(df.height))
    return labels, {c: df[c].to_list() for c in names}


def ci_text(mean: float, low: float, high: float, decimals: int = 2, signed: bool = False) -> str:
    """``mean [low, high]`` in fixed point (signed: ``+d [+l, +h]``; no "-0.00")."""
    mid, lo, hi = (_fmt(v, decimals, signed) for v in (mean, low, high))
    return f"{mid} [{lo}, {hi}]"


# --- helpers ------------------------------------------------------------------------------------


def _formatted(columns: Mapping[str, list[object]], percent: bool, decimals: int,
               lower_is_better: Collection[str], markup: bool) -> dict[str, list[str]]:
    """Column name → its cells as displayed: numbers rounded (×100 if ``percent``), strings
    passed through, best/second marked per column when ``markup``."""
    out = {}
    for col, values in columns.items():
        shown = [_display(v, percent, decimals) for v in values]
        marks = _marks(shown, lower=col in lower_is_better) if markup else [""] * len(shown)
        out[col] = [_markup(s, m, decimals) for s, m in zip(shown, marks, strict=True)]
    return out


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
