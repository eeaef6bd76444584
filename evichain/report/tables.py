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
from collections.abc import Collection, Iterable
from pathlib import Path

import pandas as pd

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
    boot: pd.DataFrame, *, reference_label: str | None = None, decimals: int = 2
) -> str:
    """EviReform Table A.1 layout from :func:`evichain.metrics.bootstrap.bootstrap_table` rows.

    Per dataset three rows: the reference method ``mean [low, high]``, the best metric-wise
    comparator ``name mean``, and the paired difference ``+d [+low, +high]`` (percentage points).
    """
    metrics = list(dict.fromkeys(boot["metric"]))
    body = []
    for dataset, block in boot.groupby("dataset", sort=False):
        diffs = block[block["kind"] == "difference"].set_index("metric")
        if diffs.empty:
            continue
        ref = reference_label or str(diffs["method"].iloc[0])
        scores = block[(block["kind"] == "score") & (block["method"] == diffs["method"].iloc[0])]
        scores = scores.set_index("metric")
        body.append([str(dataset), f"{ref} [95% CI]",
                     *[_ci_text(scores, m, decimals, signed=False) for m in metrics]])  # fmt: skip
        body.append(["", "Best metric-wise comparator",
                     *[_comparator_text(diffs, m, decimals) for m in metrics]])  # fmt: skip
        body.append(["", "Difference [95% CI]",
                     *[_ci_text(diffs, m, decimals, signed=True) for m in metrics]])  # fmt: skip
    header = ["Dataset", "Method or statistic", *metrics]
    return _markdown(header, body, align=["---", "---", *["---:"] * len(metrics)])


def render_plain_markdown(df: pd.DataFrame, *, index_name: str | None = None) -> str:
    """Markdown of ``df`` with cells as they are (no scaling, no marks; NaN/None → empty),
    the index first under ``index_name`` when given; numeric columns right-aligned, others
    left-aligned; no trailing newline."""
    cols = [str(c) for c in df.columns]
    header = ([index_name] if index_name else []) + cols
    align = (["---"] if index_name else []) + ["---:" if _numeric(df[c]) else "---" for c in df.columns]
    body = [([str(i)] if index_name else []) + ["" if _missing(v) else str(v) for v in row]
            for i, row in zip(df.index, df.itertuples(index=False), strict=True)]
    return "\n".join([_row(header), _row(align), *(_row(r) for r in body)])


def ci_text(mean: float, low: float, high: float, decimals: int = 2, signed: bool = False) -> str:
    """``mean [low, high]`` in fixed point (signed: ``+d [+l, +h]``; no "-0.00")."""
    mid, lo, hi = (_fmt(v, decimals, signed) for v in (mean, low, high))
    return f"{mid} [{lo}, {hi}]"


# --- helpers ------------------------------------------------------------------------------------


def _numeric(column: pd.Series) -> bool:
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


def _ci_text(rows: pd.DataFrame, metric: str, decimals: int, signed: bool) -> str:
    if metric not in rows.index:
        return "N/A"
    r = rows.loc[metric]
    return ci_text(*(100 * float(r[c]) for c in ("mean", "ci_low", "ci_high")), decimals, signed)


def _comparator_text(diffs: pd.DataFrame, metric: str, decimals: int) -> str:
    if metric not in diffs.index:
        return "N/A"
    r = diffs.loc[metric]
    return f"{r['comparator']} {_fmt(100 * float(r['comparator_mean']), decimals)}"


def _markdown(header: list[str], body: list[list[str]], align: list[str]) -> str:
    lines = [_row(header), _row(align), *(_row(r) for r in body)]
    return "\n".join(lines) + "\n"


def _row(cells: Iterable[object]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"
