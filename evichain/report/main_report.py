"""The paper-shaped main report (``reports/README.md``), EviReform §5, Tables 1-2 and A.1.

Inputs are the metrics JSON of every dataset × method (``reports/metrics/<ds>/<m>.json``;
answer metrics under ``qa-<m>``) and the per-question tables (``reports/eval/<ds>/<m>.parquet``).
Every table is preceded by the setup it was measured under.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from evichain.io import read_json
from evichain.metrics.bootstrap import bootstrap_table
from evichain.report.ablations import CEE_CONTRASTS, EVIREFORM_CELLS, cee_section, evireform_section
from evichain.report.families import UNRANKED
from evichain.report.tables import (
    ci_text,
    definitions_markdown,
    labelled_frame,
    render_bootstrap_markdown,
    render_markdown,
    render_plain_markdown,
)

Metrics = Mapping[str, Mapping[str, Mapping[str, Any]]]  # dataset → method → metrics JSON
RawMetrics = Mapping[str, Mapping[str, Mapping[str, Any]]]  # dataset → file stem → JSON

# IRCoT, Self-Ask and S2G-RAG return evidence without a comparable passage ranking: EviReform
# reports no recall for them (§C.1), so the main table prints N/A. Their runs (passages in order
# of first retrieval) are still evaluated and shown in reports/retrieval.md, marked as such.
# GeAR is not here: its final merged evidence is scored as a ranking, as in EviReform Table A.1.
NO_RANKING: frozenset[str] = UNRANKED


def method_sections(metrics: Metrics, per_q: Mapping[str, Mapping[str, pl.DataFrame]],
                    datasets: Sequence[str], n_resamples: int) -> list[tuple[str, str]]:
    """EviReform's 2×2 + pools and CEE's ablations for every dataset where they ran;
    ``per_q``: dataset → :func:`per_question_tables` of it."""
    sections = []
    for ds in datasets:
        found, tables = metrics.get(ds, {}), per_q.get(ds, {})
        if any(m in found for m, _, _ in EVIREFORM_CELLS):
            md = evireform_section(ds, found, tables, n_resamples)
            cells = [m for m, _, _ in EVIREFORM_CELLS if m in found]
            md = _with_line(md, missing_tables_line(ds, cells, tables))
            sections.append((f"EviReform ablation and pools: {ds}", md))
        if cee := cee_section(ds, found, tables, n_resamples):
            listed = [m for _, a, b in CEE_CONTRASTS for m in (a, b) if m in found]
            cee = _with_line(cee, missing_tables_line(ds, listed, tables))
            sections.append((f"CEE ablations: {ds}", cee))
    return sections


def _with_line(markdown: str, line: str) -> str:
    return markdown if not line else f"{markdown.rstrip()}\n\n{line}"


def read_metric_files(root: Path, datasets: Sequence[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """dataset → file stem → the JSON of ``<root>/<ds>/<stem>.json``, each file read once.

    The raw view both reports start from: :func:`fold_metrics` makes the main report's view of
    it, :func:`retrieval_metrics` the retrieval report's."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for ds in datasets:
        folder = root / ds
        paths = sorted(folder.glob("*.json")) if folder.exists() else []
        out[ds] = {path.stem: read_json(path) for path in paths}
    return out


def retrieval_metrics(raw: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """One dataset's ranking metrics: its raw files less answer (``qa-``/``medqa-``) files."""
    return {stem: dict(data) for stem, data in raw.items()
            if not stem.startswith(("qa-", "medqa-"))}


def fold_metrics(raw: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """One dataset's method → metrics, QA files ``qa-<m>`` folded in as EM/F1 keys.

    GraphRAG-Bench Medical answers (``medqa-``) are left out: they have their own section."""
    methods: dict[str, dict[str, Any]] = {}
    for name, data in raw.items():
        if name.startswith("medqa-"):
            continue
        if name.startswith("qa-"):
            m = methods.setdefault(name[3:], {})
            m.update({"EM": data.get("EM"), "F1": data.get("F1"), "n_qa": data.get("n_questions"),
                      "reader_tokens_per_question": data.get("reader_tokens_per_question")})
        else:
            methods.setdefault(name, {}).update(data)
    return methods


def load_metrics(root: Path, datasets: Sequence[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """dataset → method → metrics JSON (QA files ``qa-<m>.json`` folded in as EM/F1 keys)."""
    return {ds: fold_metrics(raw) for ds, raw in read_metric_files(root, datasets).items()}


GEAR_ORDERS: dict[str, str] = {
    "evidence": "its final merged evidence list: the passages supporting its gist-memory triples, "
                "in memory order, then every other passage it retrieved, by first retrieval. This "
                "is the list EviReform's Table A.1 scores (GeAR is its best R@5/R@10 comparator "
                "on 2Wiki)",
    "first_retrieval": "the passages it retrieved, in order of first retrieval. This is not the "
                       "merged evidence order that EviReform's Table A.1 scores",
}
"""``iterative.gear.run_order`` → what GeAR's run ranks (:mod:`evichain.methods.iterative.gear`)."""


def ranking_note(gear_run_order: str) -> str:
    """The sentence under the recall tables saying what GeAR's R@K counts (its run order,
    ``iterative.gear.run_order``) and why IRCoT, Self-Ask and S2G-RAG show N/A (EviReform §C.1)."""
    if gear_run_order not in GEAR_ORDERS:
        raise ValueError(f"iterative.gear.run_order {gear_run_order!r} is none of {sorted(GEAR_ORDERS)}")
    unranked = ", ".join(f"`{m}`" for m in sorted(NO_RANKING))
    return (f"GeAR's R@K counts the gold passages among the first K passages of its run "
            f"(`iterative.gear.run_order: {gear_run_order}`), {GEAR_ORDERS[gear_run_order]}; a list "
            f"shorter than K is scored as it is, without padding. {unranked}: N/A, as in "
            "EviReform §C.1 (no single comparable passage ranking; their answers are scored).")


def _ranks_nothing(method: str) -> bool:
    """Ranking metrics are undefined (N/A) for direct inference, which retrieves nothing, and
    for the iterative methods of :data:`NO_RANKING`, which return no comparable ranking."""
    return method in NO_RANKING or method == "direct"


def _cell(values: Mapping[str, Any], key: str, method: str = "") -> Any:
    ranking_metric = key in ("Recall@5", "Recall@10", "Hit@5", "Chain@5")
    if ranking_metric and (values.get("n_questions") == 0 or _ranks_nothing(method)):
        return "N/A"
    value = values.get(key)
    return "N/E" if value is None else value


def _missing(method: str, metric: str) -> str:
    """An empty CI cell: N/A where the metric is undefined for the method (recall of direct
    inference, which retrieves nothing, or of an iterative method of :data:`NO_RANKING`), N/E
    where it was not run."""
    ranking = metric.startswith(("Recall@", "Chain@", "Hit@"))
    return "N/A" if ranking and _ranks_nothing(method) else "N/E"


def main_table(metrics: Metrics, datasets: Sequence[str], columns: Sequence[str]) -> pl.DataFrame:
    """Table 1 shape: a ``method`` column (one row per method, sorted), then ``<dataset>
    <metric>`` columns; N/A / N/E cells (:func:`~evichain.report.tables.labelled_frame`)."""
    methods = sorted({m for ds in datasets for m in metrics.get(ds, {})})
    data = {m: {f"{ds} {c}": _cell(metrics.get(ds, {}).get(m, {}), c, m) if m in metrics.get(ds, {})
                else "N/E" for ds in datasets for c in columns} for m in methods}
    return labelled_frame(data)


def cost_table(metrics: Metrics, datasets: Sequence[str]) -> pl.DataFrame:
    """LLM tokens per question (retrieval-time and reader): a ``method`` column, then
    ``<dataset> retrieval`` and ``<dataset> reader`` columns; N/E where the method was not run
    on the dataset or its metrics JSON has no count."""
    rows: dict[str, dict[str, Any]] = {}
    for ds in datasets:
        for m, v in metrics.get(ds, {}).items():
            free = 0.0 if m in ("bm25", "dense", "direct") else "N/E"
            rows.setdefault(m, {})[f"{ds} retrieval"] = v.get("retrieval_tokens_per_question", free)
            rows[m][f"{ds} reader"] = v.get("reader_tokens_per_question", "N/E")
    columns = [f"{ds} {part}" for ds in datasets for part in ("retrieval", "reader")]
    return labelled_frame({m: {c: _not_evaluated_if_missing(row.get(c)) for c in columns}
                           for m, row in rows.items()})


def _not_evaluated_if_missing(value: Any) -> Any:
    """``value``, or ``"N/E"`` for a missing one (None or NaN)."""
    return "N/E" if value is None or (isinstance(value, float) and math.isnan(value)) else value


def per_dataset(table: pl.DataFrame, datasets: Sequence[str]) -> list[tuple[str, pl.DataFrame]]:
    """Split a ``<dataset> <metric>`` table (labels first) into one labels × metrics table per
    dataset, keeping the methods with at least one evaluated cell there (datasets with none
    dropped)."""
    label, blocks = table.columns[0], []
    for ds in datasets:
        cols = [c for c in table.columns[1:] if c.startswith(f"{ds} ")]
        if not cols:
            continue
        block = table.select(label, *cols).rename({c: c[len(ds) + 1:] for c in cols})
        cells = zip(*(block[c].to_list() for c in block.columns[1:]), strict=True)
        block = block.filter(pl.Series([any(v != "N/E" for v in row) for row in cells], dtype=pl.Boolean))
        if block.height:
            blocks.append((ds, block))
    return blocks


def question_counts(metrics: Metrics) -> dict[str, int]:
    """dataset → the largest number of evaluated questions among its methods' metrics."""
    return {ds: max((int(v.get("n_questions") or v.get("n_qa") or 0) for v in found.values()), default=0)
            for ds, found in metrics.items()}


def _blocks_markdown(table: pl.DataFrame, datasets: Sequence[str], counts: Mapping[str, int],
                     **render_kwargs: Any) -> list[str]:
    """``### <dataset>`` + its table for every dataset with evaluated cells."""
    parts: list[str] = []
    for ds, block in per_dataset(table, datasets):
        n = counts.get(ds, 0)
        parts += [f"### {ds}" + (f" ({n} questions)" if n else ""), "",
                  render_markdown(block, **render_kwargs).rstrip("\n"), ""]
    return parts


def _unmet(scheduled: Mapping[str, Sequence[str]], has_result: Callable[[str, str], bool]) -> str:
    """``"<ds>: `m1`, `m2`; ..."`` for the scheduled (dataset, method) pairs without a result
    (``has_result(dataset, method)`` false), each method once per dataset; '' if none."""
    parts = []
    for ds, methods in scheduled.items():
        missing = [m for m in dict.fromkeys(methods) if not has_result(ds, m)]
        if missing:
            parts.append(f"{ds}: {', '.join(f'`{m}`' for m in missing)}")
    return "; ".join(parts)


def pending_line(scheduled: Mapping[str, Sequence[str]], metrics: Metrics) -> str:
    """A sentence naming, per dataset, the methods ``dvc.yaml``'s matrices schedule there
    (``scheduled``: dataset → metrics-file names) that have no metrics JSON yet, so no row in
    the tables: their stages have not run on the machine that made this report. '' if none."""
    unmet = _unmet(scheduled, lambda ds, m: m in metrics.get(ds, {}))
    return ("Pending (scheduled by `dvc.yaml`, stage not yet run, so no row above; `dvc repro` "
            f"runs them): {unmet}.") if unmet else ""


def pending_answers_line(scheduled: Mapping[str, Sequence[str]], metrics: Metrics) -> str:
    """A sentence naming, per dataset, the methods whose answers ``dvc.yaml``'s reader stages
    schedule there (``scheduled``: dataset → method names) with no EM yet (no ``qa-<m>.json``),
    so F1/EM show N/E: their reader stage has not run on the machine that made this report.
    '' if none."""
    unmet = _unmet(scheduled, lambda ds, m: metrics.get(ds, {}).get(m, {}).get("EM") is not None)
    return ("Answers pending (the shared reader's stages `read*` scheduled by `dvc.yaml`, not yet "
            f"run, so F1/EM show N/E; `dvc repro` runs them): {unmet}.") if unmet else ""


def missing_tables_line(dataset: str, evaluated: Sequence[str], tables: Mapping[str, Any]) -> str:
    """A sentence naming the methods with a metrics JSON on ``dataset`` but no per-question
    table under ``reports/eval/<dataset>/`` (left out of every CI and contrast), '' if none."""
    missing = sorted(set(evaluated) - set(tables))
    if not missing:
        return ""
    return (f"Not in these CIs (metrics JSON but no per-question table `reports/eval/{dataset}/"
            f"<method>.parquet`; re-run their evaluate stage): {', '.join(f'`{m}`' for m in missing)}.")


def bootstrap_section(tables: Mapping[str, pl.DataFrame], dataset: str, reference: str,
                      metrics: Sequence[str], n_resamples: int, evaluated: Sequence[str] = ()
                      ) -> tuple[str, pl.DataFrame]:
    """Paired-bootstrap CIs for one dataset (Table A.1 shape) from its per-question tables
    (:func:`per_question_tables`); ``evaluated``: the methods with a metrics JSON there (those
    without a table are named). Returns the Markdown and the bootstrap rows."""
    missing = missing_tables_line(dataset, evaluated, tables)
    per_q = without_unranked_recall(tables)
    if len(per_q) < 2:
        return missing, pl.DataFrame()
    boot = bootstrap_table(per_q, metrics, dataset, reference, n_resamples=n_resamples)
    if boot.height == 0:
        return missing, boot
    scores = boot.filter(pl.col("kind") == "score")
    text = ["Per-method means with 95% bootstrap CIs (questions paired by id; "
            f"n = {scores['n_questions'].max()}):", "",
            render_plain_markdown(_ci_matrix(scores), index_name="Method")]
    if (boot["kind"] == "difference").any():
        text += ["", f"Paired difference of `{reference}` against the best other method per metric:",
                 "", render_bootstrap_markdown(boot)]
    else:
        text += ["", f"(`{reference}` was not evaluated on {dataset}: no difference table.)"]
    return _with_line("\n".join(text), missing), boot


def _ci_matrix(scores: pl.DataFrame) -> pl.DataFrame:
    """method × metric of ``mean [low, high]`` (points), methods and metrics sorted; a cell
    without a score says why (:func:`_missing`)."""
    ci = scores.select("method", "metric", pl.struct("mean", "ci_low", "ci_high").map_elements(
        lambda r: ci_text(100 * r["mean"], 100 * r["ci_low"], 100 * r["ci_high"]),
        return_dtype=pl.String).alias("ci"))
    table = ci.pivot(on="metric", index="method", values="ci", sort_columns=True).sort("method")
    return table.with_columns(pl.struct("method", m).map_elements(
        lambda r, m=m: r[m] if r[m] is not None else _missing(r["method"], m),
        return_dtype=pl.String).alias(m) for m in table.columns[1:])


def without_unranked_recall(per_q: Mapping[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """The per-question tables without the ranking metrics of :data:`NO_RANKING`
    methods (N/A in the main table, so no CI either); a method left with no metric column is
    dropped."""
    out = {}
    for method, table in per_q.items():
        if method in NO_RANKING:
            table = table.select(c for c in table.columns if not c.startswith(("Recall@", "Chain@", "Hit@")))
        if table.width > 1:
            out[method] = table
    return out


def per_question_tables(folder: Path) -> dict[str, pl.DataFrame]:
    """Method → per-question metrics of one dataset (2Wiki: gold-reliable rows only); a
    method's answer table ``qa-<m>`` is joined to its ranking table (full join on
    ``question_id``: nulls where one side lacks the question)."""
    tables: dict[str, pl.DataFrame] = {}
    for path in sorted(folder.glob("*.parquet")) if folder.exists() else []:
        if path.stem.startswith("medqa-"):  # Medical answer metrics: their own section
            continue
        name = path.stem
        key = name[3:] if name.startswith("qa-") else name
        part = _metric_columns(pl.read_parquet(path), answers=name.startswith("qa-"))
        tables[key] = part if key not in tables else \
            tables[key].join(part, on="question_id", how="full", coalesce=True)
    return tables


_RANKING_PREFIXES = ("Recall@", "Chain@", "Hit@", "MAP@", "nDCG@")


def _metric_columns(df: pl.DataFrame, answers: bool) -> pl.DataFrame:
    """``question_id`` and the metric columns (EM/F1 of an answer table, the ranking metrics
    otherwise) of the gold-reliable rows (a null flag counts as reliable)."""
    if "gold_reliable" in df.columns:
        df = df.filter(pl.col("gold_reliable").fill_null(True).cast(pl.Boolean))
    cols = ["question_id", "EM", "F1"] if answers else \
        ["question_id", *[c for c in df.columns if c.startswith(_RANKING_PREFIXES)]]
    return df.select(c for c in cols if c in df.columns)


def render(setup: str, main: pl.DataFrame, decomposition: pl.DataFrame, cost: pl.DataFrame,
           bootstrap_md: Sequence[tuple[str, str]], figures: Sequence[str],
           not_run: Sequence[str] = (), method_sections: Sequence[tuple[str, str]] = (),
           counts: Mapping[str, int] | None = None, pending: str = "", medical: str = "",
           pages: str = "", ranking: str = "", figure_notes: Sequence[str] = (),
           index_stats: str = "") -> str:
    """The whole report as Markdown (``not_run``: methods that cannot run here, and why;
    ``method_sections``: (title, Markdown) of the methods' ablation analyses; ``counts``:
    questions per dataset for the headings; ``pending``: :func:`pending_line`; ``medical``:
    the GraphRAG-Bench Medical section, :func:`evichain.report.medical.medical_section`;
    ``pages``: the list of per-dataset pages, :func:`evichain.report.dataset_pages.pages_index`;
    ``ranking``: :func:`ranking_note`, under the main table; ``figure_notes``: why a figure is
    not drawn (too few questions); ``index_stats``: the index-statistics section,
    :func:`evichain.report.index_stats.index_stats_section`). The three wide tables are shown
    one dataset at a time, each with only the methods evaluated there."""
    datasets = list(dict.fromkeys(c.split(" ", 1)[0] for c in main.columns[1:]))
    counts = counts or {}
    tokens_kwargs = {"percent": False, "decimals": 1, "lower_is_better": ("retrieval", "reader")}
    parts = ["# evichain results", "",
             "Generated by `dvc repro` (stage `report`); do not edit by hand. Percentages; in each "
             "column the best value is bold and the second best underlined. N/A = not applicable "
             "(no gold passages; or recall of IRCoT, Self-Ask or S2G-RAG, which return evidence "
             "without a passage ranking, as in the paper's Table 1 and §C.1), N/E = not evaluated "
             "(method not run on that dataset).", "",
             *(["## Per-dataset pages", "", pages, ""] if pages else []),
             "Hand-written notes on the runs (how they were run, timings, what the traces "
             "show, limitations): [notes.md](notes.md).", "",
             "## Setup", "", setup, "",
             "## Main table (EviReform Table 1 shape: R@5, R@10, F1, EM)", "", setup, "",
             *_blocks_markdown(main, datasets, counts),
             *([ranking, ""] if ranking else []),
             *([f"Not run: {'; '.join(not_run)}.", ""] if not_run else []),
             *([pending, ""] if pending else []),
             "## Retrieval decomposition at K = 5 (Table 2 shape: Hit@5 / Recall@5 / Chain@5)", "",
             setup, "", *_blocks_markdown(decomposition, datasets, counts),
             "## LLM tokens per question", "", setup, "",
             *_blocks_markdown(cost, datasets, counts, **tokens_kwargs)]
    for dataset, md in bootstrap_md:
        if md:
            parts += [f"## Paired bootstrap: {dataset}", "", setup, "", md, ""]
    for title, md in method_sections:
        parts += [f"## {title}", "", setup, "", md, ""]
    if figures or figure_notes:
        parts += ["## Figures", "", *[f"![{f}]({f})" for f in figures],
                  *[line for note in figure_notes for line in ("", note)], ""]
    parts += [index_stats.rstrip("\n"), ""] if index_stats else []
    parts += [medical] if medical else []
    parts += ["## Metric definitions", "",
              definitions_markdown(["Recall@K", "Chain@K", "Hit@K", "MAP@10", "nDCG@10", "EM", "F1"])]
    return "\n".join(parts)
