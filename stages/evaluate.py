"""DVC stage ``evaluate@<dataset>-<method>`` (retrieval) and ``evaluate_qa@…`` (answers).

Retrieval: a run → ``reports/eval/<ds>/<method>.parquet`` (per question) and
``reports/metrics/<ds>/<method>.json`` (means, git-tracked for ``dvc metrics diff``).
QA: answers → ``reports/eval/<ds>/qa-<method>.parquet`` and ``reports/metrics/<ds>/qa-<method>.json``
(EM/F1 as EviReform C.4). On 2Wiki (and the demo slice of it) the means cover the
gold-reliable questions only when ``evaluate.twowiki_reliable_only`` is true (default).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pandas as pd
import typer

from stages._common import run_stage

from evichain.paths import DatasetPaths  # noqa: E402  (after the environment defaults)

if TYPE_CHECKING:
    from evichain.config import OrchestrationParams

app = typer.Typer(add_completion=False)


def summarize(per_q: pd.DataFrame, dataset: str, method: str, reliable_only: bool) -> dict[str, object]:
    """The metrics JSON: means over the evaluated questions and what was evaluated."""
    from evichain.metrics.retrieval import aggregate

    subset = per_q[per_q["gold_reliable"]] if reliable_only else per_q
    out: dict[str, object] = {"dataset": dataset, "method": method,
                              "question_filter": "gold_reliable" if reliable_only else "all"}
    if subset.empty:
        out.update({"n_questions": 0, "note": "no gold passages: retrieval metrics N/A"})
        return out
    subset = subset.drop(columns=["gold_reliable"])
    subset.attrs = per_q.attrs
    means = aggregate(subset)
    out.update({k: (int(v) if k.startswith("n_") else round(float(v), 6)) for k, v in means.items()})
    return out


@app.command()
def main(dataset: str = typer.Option(...), method: str = typer.Option(...),
         kind: str = typer.Option("retrieval", help="retrieval | qa"),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.io import read_parquet, write_json, write_parquet
        from evichain.paths import ReportPaths

        if kind not in ("retrieval", "qa"):
            raise ValueError(f"--kind must be 'retrieval' or 'qa', got {kind!r}")
        params = load_params(params_file)
        paths = DatasetPaths(dataset)
        questions = read_parquet(paths.questions)
        per_q = _per_question(kind, paths, method, params.evaluate.ks, params.orchestration)
        attrs = per_q.attrs
        per_q = per_q.merge(questions[["question_id", "gold_reliable"]], on="question_id", how="left")
        per_q.attrs = attrs
        name = method if kind == "retrieval" else f"qa-{method}"
        write_parquet(per_q.sort_values("question_id").reset_index(drop=True), paths.per_question(name))
        reliable_only = (params.evaluate.twowiki_reliable_only
                         and params.data.source_of(dataset) == "2wiki")
        summary = summarize(per_q, dataset, method, reliable_only)
        if kind == "retrieval" and paths.trace(method).exists():  # LLM retrieval methods
            from evichain.metrics.cost import tokens_per_question

            trace = read_parquet(paths.trace(method))
            spent = tokens_per_question(trace)
            if spent is not None:
                summary["retrieval_tokens_per_question"] = spent
            if {"c0_gold", "cplus_gold"} <= set(trace.columns):  # EviReform: Tables A.3/A.4
                from evichain.report.ablations import pool_analysis

                evaluated = per_q[per_q["gold_reliable"]] if reliable_only else per_q
                summary["pool_analysis"] = pool_analysis(trace, evaluated["question_id"])
        if kind == "qa":  # tokens each answer needed (the same whether it came from the cache)
            answers = read_parquet(paths.qa(method))
            tokens = answers["prompt_tokens"] + answers["completion_tokens"]
            summary["reader_tokens_per_question"] = round(float(tokens.mean()), 2) if len(tokens) else 0.0
        write_json(summary, ReportPaths().metrics(dataset, name))
        return {k: summary[k] for k in ("dataset", "method", "n_questions") if k in summary}

    run_stage(f"evaluate@{dataset}-{method}" + ("" if kind == "retrieval" else "-qa"), body)


def _per_question(kind: Literal["retrieval", "qa"] | str, paths: DatasetPaths, method: str,
                  ks: list[int], orch: OrchestrationParams) -> pd.DataFrame:
    """The per-question table, from a flow run named and tagged as the stage."""
    from flows.common import with_runner

    if kind == "qa":
        from flows.evaluate import evaluate_qa_flow

        return with_runner(evaluate_qa_flow, orch)(paths.qa(method), paths.questions)
    from flows.evaluate import evaluate_flow

    return with_runner(evaluate_flow, orch)(paths.run(method), paths.questions, ks)


if __name__ == "__main__":
    app()
