"""Method analyses of the report: EviReform's 2×2 ablation and pool coverage, CEE's ablation.

* EviReform (paper §5.2, Table 3 / A.2): reformulation × propagation — ``base`` (neither),
  ``prop_only``, ``reform_only``, ``full`` — as point values, then each contrast
  ``mean(a − b)`` of two cells with a paired bootstrap 95% CI over the questions both were
  evaluated on (:func:`evichain.metrics.bootstrap.paired_difference_ci`; one index matrix per
  dataset and metric, seed :func:`~evichain.metrics.bootstrap.seed_for`).
* EviReform controls (Table A.2 panel a/b, §A.4): ``full`` beside each control that ran
  (``residual_only``: s = r; ``repeat_question``: the original question instead of the residual
  queries, matched retrieval count; ``reorder``: the Listing 15 judge over the question's pool;
  ``rounds3``: up to three rounds) and ``mean(full − control)`` with its paired CI, over the
  questions full and every listed control answered.
* EviReform pools (Appendix A.3, Tables A.3 / A.4): :func:`pool_analysis` summarises one
  variant's trace in the evaluate stage (coverage of C₀ and C₊, transitions of pools that miss
  gold, selection survival, tokens per question for selection and reformulation); the report
  prints it from the metrics JSON.
* CEE (paper Table 2): full and each ablation (w/o coverage-aware final ranking, w/o
  contrastive refinement, w/o sequential exploration) with R@10 / nDCG@10 / FSR@10 (= Chain@10)
  and the main table's R@5 / MAP@10.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import polars as pl

from evichain.methods.evireform.coverage import coverage_table, selection_table, token_table, transition_table
from evichain.metrics.bootstrap import (
    aligned_values,
    column_mean,
    paired_difference_ci,
    resample_indices,
    seed_for,
)
from evichain.report.tables import ci_text, render_plain_markdown

Json = Mapping[str, Any]

# (method, reformulation, propagation): the cells of the 2×2.
EVIREFORM_CELLS: tuple[tuple[str, bool, bool], ...] = (
    ("evireform-base", False, False), ("evireform-prop_only", False, True),
    ("evireform-reform_only", True, False), ("evireform-full", True, True))

# (contrast, a, b): the effect of one component with the other held fixed, and of both.
EVIREFORM_CONTRASTS: tuple[tuple[str, str, str], ...] = (
    ("reformulation, propagation off", "evireform-reform_only", "evireform-base"),
    ("reformulation, propagation on", "evireform-full", "evireform-prop_only"),
    ("propagation, reformulation off", "evireform-prop_only", "evireform-base"),
    ("propagation, reformulation on", "evireform-full", "evireform-reform_only"),
    ("both (full - base)", "evireform-full", "evireform-base"))

EVIREFORM_METRICS: tuple[str, ...] = ("Recall@2", "Recall@5", "Chain@5")

# (method, what it changes): the controls of Table A.2 / §A.4, each compared with ``full``.
EVIREFORM_CONTROLS: tuple[tuple[str, str], ...] = (
    ("evireform-residual_only", "residual queries only (s = r)"),
    ("evireform-repeat_question", "original question repeated instead of residual queries"),
    ("evireform-reorder", "LLM reorders the question's pool (Listing 15)"),
    ("evireform-rounds3", "up to three reformulation rounds (Listing 16)"))

CEE_ROWS: tuple[tuple[str, str], ...] = (
    ("cee-full", "CEE (full)"), ("cee-no_coverage", "w/o coverage-aware final ranking"),
    ("cee-no_contrastive", "w/o contrastive refinement"),
    ("cee-no_sequential", "w/o sequential exploration"))

CEE_METRICS: tuple[str, ...] = ("Recall@10", "nDCG@10", "Chain@10", "Recall@5", "MAP@10")

# Baselines the CEE paper compares against, printed under its ablation rows (same questions).
CEE_REFERENCES: tuple[tuple[str, str], ...] = (("bm25", "BM25"), ("dense", "dense"))

# (contrast, a, b): what removing each component costs (the paper: full > every ablation, the
# sequential exploration the largest drop), and CEE against the two first-stage retrievers.
CEE_CONTRASTS: tuple[tuple[str, str, str], ...] = (
    ("coverage-aware final ranking (full - w/o)", "cee-full", "cee-no_coverage"),
    ("contrastive refinement (full - w/o)", "cee-full", "cee-no_contrastive"),
    ("sequential exploration (full - w/o)", "cee-full", "cee-no_sequential"),
    ("full - dense", "cee-full", "dense"), ("full - BM25", "cee-full", "bm25"))


def pool_analysis(traces: pl.DataFrame, question_ids: Iterable[str] | None = None) -> dict[str, Any]:
    """Tables A.3 / A.4, selection survival and tokens of one EviReform trace, as JSON.

    ``question_ids`` restricts every table to the evaluated questions (2Wiki: gold-reliable),
    rows kept in trace order. The tables are :mod:`evichain.methods.evireform.coverage`'s, which
    computes on pandas (not migrated yet): the kept rows are converted at that call only.
    """
    ids = None if question_ids is None else list(dict.fromkeys(map(str, question_ids)))
    kept = traces if ids is None else traces.filter(pl.col("question_id").cast(pl.String).is_in(ids))
    frame = kept.to_pandas()
    return {"questions": kept.height,
            "coverage": coverage_table(frame).to_dict("records"),
            "transitions": transition_table(frame).to_dict("records")[0],
            "selection": selection_table(frame).to_dict("records")[0],
            "tokens": token_table(frame).to_dict("records")[0]}


def evireform_ablation(metrics: Mapping[str, Json],
                       columns: Sequence[str] = EVIREFORM_METRICS) -> pl.DataFrame:
    """The 2×2 (Table 3 shape) from one dataset's metrics JSON; percentages; empty if no cell ran."""
    rows = [{"Reformulation": "✓" if reform else "✗", "Propagation": "✓" if prop else "✗",
             "method": method, **_scores(metrics[method], columns)}
            for method, reform, prop in EVIREFORM_CELLS if method in metrics]
    return pl.DataFrame(rows)


CONTRAST_SCHEMA: dict[str, type[pl.DataType]] = {
    "metric": pl.String, "contrast": pl.String, "a": pl.String, "b": pl.String, "n": pl.Int64,
    "a_mean": pl.Float64, "b_mean": pl.Float64, "difference": pl.Float64, "ci_low": pl.Float64,
    "ci_high": pl.Float64}  # fmt: skip


def paired_contrasts(per_q: Mapping[str, pl.DataFrame], dataset: str,
                     contrasts: Sequence[tuple[str, str, str]], columns: Sequence[str],
                     n_resamples: int = 10_000) -> pl.DataFrame:
    """Each contrast ``(name, a, b)``: both means and ``mean(a − b)`` in points with its paired
    95% bootstrap CI, over the questions every method of ``per_q`` answered (one index matrix
    per metric, seed ``seed_for(dataset, metric)``); a contrast missing a or b is skipped.
    Columns: :data:`CONTRAST_SCHEMA`."""
    rows = []
    for metric in columns:
        matrix = aligned_values(per_q, metric)
        if matrix.height == 0:
            continue
        indices = resample_indices(matrix.height, n_resamples, seed_for(dataset, metric))
        methods = matrix.columns[1:]
        for name, a, b in contrasts:
            if a in methods and b in methods:
                ci = paired_difference_ci(matrix[a].to_numpy(), matrix[b].to_numpy(), indices=indices)
                rows.append({"metric": metric, "contrast": name, "a": a, "b": b, "n": matrix.height,
                             "a_mean": _pct(column_mean(matrix, a)),
                             "b_mean": _pct(column_mean(matrix, b)), "difference": _pct(ci.mean),
                             "ci_low": _pct(ci.low), "ci_high": _pct(ci.high)})
    return pl.DataFrame(rows, schema=CONTRAST_SCHEMA)


def evireform_contrasts(per_q: Mapping[str, pl.DataFrame], dataset: str,
                        columns: Sequence[str] = EVIREFORM_METRICS,
                        n_resamples: int = 10_000) -> pl.DataFrame:
    """The 2×2's contrasts (:data:`EVIREFORM_CONTRASTS`) over the questions every cell answered."""
    cells = {m: per_q[m] for m, _, _ in EVIREFORM_CELLS if m in per_q}
    return paired_contrasts(cells, dataset, EVIREFORM_CONTRASTS, columns, n_resamples)


def evireform_section(dataset: str, metrics: Mapping[str, Json],
                      per_q: Mapping[str, pl.DataFrame], n_resamples: int) -> str:
    """Markdown of the 2×2, its contrasts, the controls and the pool analyses of one dataset
    ('' if no cell of the 2×2 ran)."""
    table = evireform_ablation(metrics)
    if table.height == 0:
        return ""
    parts = ["Reformulation × propagation (EviReform Table 3 shape; percentages):", "",
             render_plain_markdown(table), ""]
    parts += contrast_markdown(evireform_contrasts(per_q, dataset, n_resamples=n_resamples),
                               "every cell", n_resamples)
    parts += evireform_controls(metrics, per_q, dataset, n_resamples)
    parts += _pool_tables(metrics)
    return "\n".join(parts)


def evireform_controls(metrics: Mapping[str, Json], per_q: Mapping[str, pl.DataFrame],
                       dataset: str, n_resamples: int) -> list[str]:
    """Lines of the controls panel: ``full`` and every control that ran (percentages), then
    ``full − control`` per metric with paired CIs; [] when ``full`` or every control is missing."""
    ran = [(m, what) for m, what in EVIREFORM_CONTROLS if m in metrics]
    if "evireform-full" not in metrics or not ran:
        return []
    rows = [{"method": m, "changes": what, **_scores(metrics[m], EVIREFORM_METRICS)}
            for m, what in [("evireform-full", "the full method"), *ran]]
    methods = ["evireform-full", *(m for m, _ in ran)]
    contrasts = paired_contrasts({m: per_q[m] for m in methods if m in per_q}, dataset,
                                 [(f"full - {m.removeprefix('evireform-')}", "evireform-full", m)
                                  for m, _ in ran], EVIREFORM_METRICS, n_resamples)
    return (["Controls (EviReform Table A.2 shape; percentages):", "",
             render_plain_markdown(pl.DataFrame(rows)), ""]
            + contrast_markdown(contrasts, "full and every listed control", n_resamples))


def _pool_tables(metrics: Mapping[str, Json]) -> list[str]:
    coverage, transitions, selection, tokens = [], [], [], []
    for method in [m for m, _, _ in EVIREFORM_CELLS] + [m for m, _ in EVIREFORM_CONTROLS]:
        pools = metrics.get(method, {}).get("pool_analysis")
        if not pools:
            continue
        coverage += [{"method": method, **row} for row in pools["coverage"]]
        transitions.append({"method": method, **pools["transitions"]})
        selection.append({"method": method, **pools["selection"]})
        tokens.append({"method": method, **pools["tokens"]})
    if not coverage:
        return []
    return ["Pool coverage (Table A.3 shape): C0 = first 20 distinct source passages of the "
            "top-100 propositions, C+ = C0 + passages of residual-retrieved propositions; gold "
            "coverage = mean |G ∩ C| / |G|, complete chain = share with G ⊆ C (percent):", "",
            render_plain_markdown(pl.DataFrame(coverage)), "",
            "Pools that miss gold (Table A.4 shape):", "", render_plain_markdown(pl.DataFrame(transitions)), "",
            "Selection survival (percent of gold passages; fallbacks percent of questions):", "",
            render_plain_markdown(pl.DataFrame(selection)), "",
            "LLM tokens per question (selection, reformulation, reorder judge):", "",
            render_plain_markdown(pl.DataFrame(tokens)), ""]


def cee_ablation(metrics: Mapping[str, Json], columns: Sequence[str] = CEE_METRICS) -> pl.DataFrame:
    """CEE and its ablations (paper Table 2 shape; Chain@10 = FSR@10), then BM25 and dense where
    they ran; empty if CEE did not run."""
    if not any(method in metrics for method, _ in CEE_ROWS):
        return pl.DataFrame()
    rows = [{"variant": label, "method": method, **_scores(metrics[method], columns)}
            for method, label in CEE_ROWS + CEE_REFERENCES if method in metrics]
    return pl.DataFrame(rows)


def facet_note(metrics: Mapping[str, Json]) -> str:
    """One line on the facet index the CEE rows were measured with (``facets`` of the metrics
    JSON, written by the evaluate stage); names a machine restriction as such."""
    setup = next((metrics[m]["facets"] for m, _ in CEE_ROWS if m in metrics and metrics[m].get("facets")),
                 None)
    if not setup:
        return ""
    built = (f"facets for {setup.get('passages_with_facets')} of {setup.get('passages')} passages, "
             f"{setup.get('pairs')} (target, neighbour) pairs, {setup.get('facets')} facet queries")
    if not setup.get("machine_restricted"):
        return f"Facet index: {built} (the paper's setting: every passage, its nearest neighbours)."
    return (f"Facet index, **restricted on this machine (not by the method)**: {built}; only the "
            f"passages in some question's dense top {setup.get('facet_scope_n')} are targets, each "
            f"against its {setup.get('max_pairs_per_passage')} nearest neighbour(s) instead of "
            f"{setup.get('n_neighbours')} (`cee.facets.restricted`); passages outside have no facets, "
            "so their contrastive score is their base score. Rounds, K_cand, K_final, alpha and beta "
            "are the paper's.")


def cee_section(dataset: str, metrics: Mapping[str, Json],
                per_q: Mapping[str, pl.DataFrame] | None = None, n_resamples: int = 10_000) -> str:
    """Markdown of one dataset's CEE ablation table, its facet setup and the paired contrasts of
    :data:`CEE_CONTRASTS` ('' if CEE did not run there)."""
    table = cee_ablation(metrics)
    if table.height == 0:
        return ""
    note = facet_note(metrics)
    parts = ([note, ""] if note else []) + [
        "CEE ablations (paper Table 2 shape, with the main table's R@5 / MAP@10; "
        "FSR@10 = Chain@10; percentages):", "", render_plain_markdown(table), ""]
    methods = {m for _, a, b in CEE_CONTRASTS for m in (a, b)}
    contrasts = paired_contrasts({m: t for m, t in (per_q or {}).items() if m in methods},
                                 dataset, CEE_CONTRASTS, CEE_METRICS, n_resamples)
    return "\n".join(parts + contrast_markdown(contrasts, "every listed method", n_resamples))


def contrast_markdown(contrasts: pl.DataFrame, over: str, n_resamples: int) -> list[str]:
    """Lines of a :func:`paired_contrasts` table (difference with its CI), headed by what the
    questions were paired over; [] when no contrast could be computed."""
    if contrasts.height == 0:
        return []
    shown = contrasts.select("metric", "contrast", "n",
                             difference_ci(contrasts).alias("difference [95% CI]"))
    return [f"Contrasts (points; paired bootstrap over the questions {over} answered, "
            f"{n_resamples:,} resamples):", "", render_plain_markdown(shown), ""]


def difference_ci(contrasts: pl.DataFrame) -> pl.Series:
    """``+d [+low, +high]`` (:func:`ci_text`, signed) of each :func:`paired_contrasts` row."""
    return pl.Series([ci_text(d, lo, hi, signed=True) for d, lo, hi in
                      contrasts.select("difference", "ci_low", "ci_high").iter_rows()], dtype=pl.String)


def _scores(metrics: Json, columns: Sequence[str]) -> dict[str, Any]:
    """``n`` and each metric in percent from one method's metrics JSON."""
    return {"n": metrics.get("n_questions"), **{c: _pct(metrics.get(c)) for c in columns}}


def _pct(value: Any) -> float | None:
    """``round(100 · value, 2)``; None for a missing (None/NaN) value."""
    return None if value is None or math.isnan(float(value)) else round(100.0 * float(value), 2)
