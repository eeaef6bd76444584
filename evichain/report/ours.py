"""Report section for the variants of ours (issue 38): each against a named baseline and
against its paper-faithful parent, as paired bootstrap differences over the same questions.

For dataset D, variant v and comparator c, on the questions both were evaluated on:
Δ = mean_q (m_v(q) − m_c(q)) in points, with the 95% percentile interval of ``n_resamples``
paired resamples (the report's contrast code, seed ``seed_for(D, m)``: the same numbers as
``scripts/compare_methods.py D v c``), so "CI lower bound > 0" reads directly off the table. Rows whose comparator or variant has no
per-question table are left out and named.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import polars as pl

from evichain.metrics.frames import as_polars
from evichain.report.ablations import difference_ci, paired_contrasts
from evichain.report.tables import render_plain_markdown

PARENT: dict[str, tuple[str, ...]] = {
    "evireform-robust": ("evireform-full",), "evireform-hybrid": ("evireform-full",),
    "cee-robust": ("cee-full",), "evireform-fused": ("evireform-full",),
    "seeds-fused": ("evireform-full", "cee-full")}
"""The paper-faithful variant(s) each variant of ours departs from."""


def difference_rows(per_q: Mapping[str, pl.DataFrame | pd.DataFrame], dataset: str, ours: Sequence[str],
                    comparators: Sequence[str], metrics: Sequence[str], n_resamples: int
                    ) -> pd.DataFrame:
    """:func:`difference_frame` as pandas (no column when empty). pandas only for its caller
    outside the report (tests/methods/evireform), not migrated yet."""
    frame = difference_frame(per_q, dataset, ours, comparators, metrics, n_resamples)
    return frame.to_pandas() if frame.height else pd.DataFrame()


def difference_frame(per_q: Mapping[str, pl.DataFrame | pd.DataFrame], dataset: str,
                     ours: Sequence[str], comparators: Sequence[str], metrics: Sequence[str],
                     n_resamples: int) -> pl.DataFrame:
    """One row per (variant, comparator, metric) with both tables: the paired Δ and its CI
    (:func:`~evichain.report.ablations.paired_contrasts` on the pair's common questions).

    pandas tables are accepted for the caller outside the report that passes them
    (tests/methods/evireform) and converted here, once (:func:`as_polars`)."""
    per_q = {m: as_polars(t) for m, t in per_q.items()}
    parts = [paired_contrasts({v: per_q[v], c: per_q[c]}, dataset, [(f"{v} − {c}", v, c)],
                              metrics, n_resamples)
             for v in ours if v in per_q
             for c in dict.fromkeys([*comparators, *PARENT.get(v, ())]) if c in per_q and c != v]
    parts = [p for p in parts if p.height]
    return pl.concat(parts) if parts else pl.DataFrame()


def ours_section(per_q: Mapping[str, pl.DataFrame | pd.DataFrame], dataset: str, ours: Sequence[str],
                 comparators: Sequence[str], metrics: Sequence[str], n_resamples: int,
                 tuning: bool = False) -> str:
    """Markdown for one dataset ('' when no variant of ours has a per-question table there);
    ``tuning``: the dataset the values were chosen on, headed as such (not a result)."""
    table = difference_frame(per_q, dataset, ours, comparators, metrics, n_resamples)
    if table.height == 0:
        return ""
    shown = table.select(
        pl.col("a").alias("variant"), pl.col("b").alias("vs"), "metric", "n",
        pl.Series("means (variant / vs)", [f"{a:.2f} / {b:.2f}" for a, b in
                                           table.select("a_mean", "b_mean").iter_rows()]),
        difference_ci(table).alias("Δ [95% CI]"),
        pl.when(pl.col("ci_low") > 0).then(pl.lit("yes")).otherwise(pl.lit("no")).alias("CI > 0"))
    absent = [o for o in ours if o not in per_q]
    note = f"\n\nNo per-question table here for: {', '.join(absent)}." if absent else ""
    head = f"#### {dataset}" + (" (tuning sample: the values were chosen here, not a result)"
                                if tuning else "")
    return f"{head}\n\n{render_plain_markdown(shown, index_name='variant')}{note}"
