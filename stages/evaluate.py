"""DVC stage ``evaluate@<dataset>-<method>`` (retrieval) and ``evaluate_qa@…`` (answers).

Retrieval: a run → ``reports/eval/<ds>/<method>.parquet`` (per question) and
``reports/metrics/<ds>/<method>.json`` (means, git-tracked for ``dvc metrics diff``).
QA: answers → ``reports/eval/<ds>/qa-<method>.parquet`` and ``reports/metrics/<ds>/qa-<method>.json``
(EM/F1 as EviReform C.4). On 2Wiki (and the demo slice of it) the means cover the
gold-reliable questions only when ``evaluate.twowiki_reliable_only`` is true (default).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import polars as pl
import typer

from stages._common import run_stage

from evichain.paths import DatasetPaths  # noqa: E402  (after the environment defaults)

if TYPE_CHECKING:
    import pandas as pd

    from evichain.config import OrchestrationParams

app = typer.Typer(add_completion=False)

Excluded = Mapping[str, Sequence[str]]
"""``{excluded_<why>: question ids}`` beside a per-question table (counted by ``aggregate``)."""

QA_STRING_COLUMNS: tuple[str, ...] = ("question_id", "status")
"""Columns of a QA per-question table stored as Arrow ``string`` (32-bit offsets), the type
the committed ``qa-*.parquet`` tables have; polars writes ``large_string``."""


def summarize(per_q: pl.DataFrame, excluded: Excluded, dataset: str, method: str,
              reliable_only: bool) -> dict[str, object]:
    """The metrics JSON: means over the evaluated questions and what was evaluated.

    Evaluated = the rows with ``gold_reliable`` true when ``reliable_only``, else all rows;
    each mean is ``aggregate``'s ``mean_q value_q`` rounded to 6 decimals, each ``n_*`` an int.
    """
    from evichain.metrics.retrieval import aggregate

    subset = evaluated(per_q, reliable_only)
    out: dict[str, object] = {"dataset": dataset, "method": method,
                              "question_filter": "gold_reliable" if reliable_only else "all"}
    if subset.height == 0:
        out.update({"n_questions": 0, "note": "no gold passages: retrieval metrics N/A"})
        return out
    means = aggregate(subset.drop("gold_reliable"), excluded)
    out.update({k: (int(v) if k.startswith("n_") else round(float(v), 6)) for k, v in means.items()})
    return out


def evaluated(per_q: pl.DataFrame, reliable_only: bool) -> pl.DataFrame:
    """The rows the means cover: ``gold_reliable`` true (null counts as false) when
    ``reliable_only``, else every row."""
    return per_q.filter(pl.col("gold_reliable")) if reliable_only else per_q


def with_gold_reliable(per_q: pl.DataFrame, questions: pl.DataFrame) -> pl.DataFrame:
    """``per_q`` left-joined with the questions' ``gold_reliable`` on ``question_id``, sorted by
    ``question_id`` (the order of the table on disk)."""
    flags = questions.select(pl.col("question_id").cast(pl.String), "gold_reliable")
    return per_q.join(flags, on="question_id", how="left").sort("question_id")


def on_disk(per_q: pl.DataFrame, kind: str) -> pl.DataFrame | pd.DataFrame:
    """What :func:`evichain.io.write_parquet` is given: the table itself (retrieval), or for
    QA a pandas copy whose :data:`QA_STRING_COLUMNS` are object columns, so that they are stored
    as Arrow ``string`` as in the committed tables (``write_parquet`` has no option for that
    type from polars)."""
    if kind != "qa":
        return per_q
    return per_q.to_pandas().astype({c: object for c in QA_STRING_COLUMNS})


def reader_tokens_per_question(answers: pl.DataFrame) -> float:
    """``mean_q (prompt_tokens_q + completion_tokens_q)`` rounded to 2 decimals (a null on
    either side leaves the question out); 0.0 for no answers."""
    from evichain.metrics.frames import mean

    tokens = answers.select(pl.col("prompt_tokens") + pl.col("completion_tokens")).to_series()
    return round(mean(tokens), 2) if tokens.len() else 0.0


@app.command()
def main(dataset: str = typer.Option(...), method: str = typer.Option(...),
         kind: str = typer.Option("retrieval", help="retrieval | qa"),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.io import read_table, write_json, write_parquet
        from evichain.paths import ReportPaths

        if kind not in ("retrieval", "qa"):
            raise ValueError(f"--kind must be 'retrieval' or 'qa', got {kind!r}")
        params = load_params(params_file)
        paths = DatasetPaths(dataset)
        scored, excluded = _per_question(kind, paths, method, params.evaluate.ks, params.orchestration)
        per_q = with_gold_reliable(scored, read_table(paths.questions))
        name = method if kind == "retrieval" else f"qa-{method}"
        write_parquet(on_disk(per_q, kind), paths.per_question(name))
        reliable_only = (params.evaluate.twowiki_reliable_only
                         and params.data.source_of(dataset) == "2wiki")
        summary = summarize(per_q, excluded, dataset, method, reliable_only)
        if kind == "retrieval" and paths.trace(method).exists():  # LLM retrieval methods
            from evichain.metrics.cost import tokens_per_question

            trace = read_table(paths.trace(method))
            spent = tokens_per_question(trace)
            if spent is not None:
                summary["retrieval_tokens_per_question"] = spent
            if {"c0_gold", "cplus_gold"} <= set(trace.columns):  # EviReform: Tables A.3/A.4
                from evichain.report.ablations import pool_analysis

                ids = evaluated(per_q, reliable_only)["question_id"].to_list()
                summary["pool_analysis"] = pool_analysis(trace, ids)
        if kind == "qa":  # tokens each answer needed (the same whether it came from the cache)
            summary["reader_tokens_per_question"] = reader_tokens_per_question(read_table(paths.qa(method)))
        write_json(summary, ReportPaths().metrics(dataset, name))
        return {k: summary[k] for k in ("dataset", "method", "n_questions") if k in summary}

    run_stage(f"evaluate@{dataset}-{method}" + ("" if kind == "retrieval" else "-qa"), body)


def _per_question(kind: Literal["retrieval", "qa"] | str, paths: DatasetPaths, method: str,
                  ks: list[int], orch: OrchestrationParams) -> tuple[pl.DataFrame, Excluded]:
    """The per-question table and its excluded ids, from a flow run named and tagged as the
    stage."""
    from flows.common import with_runner

    if kind == "qa":
        from flows.evaluate import evaluate_qa_flow

        return with_runner(evaluate_qa_flow, orch)(paths.qa(method), paths.questions)
    from flows.evaluate import evaluate_flow

    return with_runner(evaluate_flow, orch)(paths.run(method), paths.questions, ks)


if __name__ == "__main__":
    app()
