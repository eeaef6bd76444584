"""EviReform's one-at-a-time sweep (``sweep_evireform``; paper §A.6, Fig. A.2).

Modelled on the tuning flow (:func:`flows.evireform.tuning_flow`): the method from the registry,
its index built once (:func:`flows.method.prepare`), then each configuration of
:func:`evichain.methods.evireform.sweep.sweep_configs` built over that index with the
configuration's ``evireform`` block, the default first. Each configuration gets LLM clients of
its own (:class:`flows.method.StageClients`), so its usage is its own, and its questions run as
the retrieval flow runs them (:func:`flows.questions.retrieve_questions`: one task per question),
which keeps the traces: the default's count the reformulation calls that each other value of L
would need.

The default runs first and alone: its answers are cached before any other configuration asks.
A configuration of α, β or (with ``rounds: 1``) k_r that makes a model call, or has more failed
requests than the default, stops the flow (:func:`evichain.methods.evireform.sweep.check_replay`);
the questions whose default run had a failed LLM step are listed in the summary.

Flows take paths and params, never tables (Prefect stores flow parameters, at most 512 KB).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import polars as pl
from prefect import flow, get_run_logger

from evichain.config import Params
from evichain.methods.base import BuildContext, Method, get_method, run_frame
from evichain.methods.evireform.index import EviReformIndex
from evichain.methods.evireform.sweep import (
    VARIANT,
    SweepConfig,
    check_replay,
    config_params,
    config_values,
    failed_question_ids,
    reformulation_calls,
    replays,
    sweep_configs,
    unrun_values,
)
from evichain.metrics.frames import as_polars
from evichain.metrics.retrieval import per_question_frame
from evichain.paths import DatasetPaths
from flows.common import on_dask, with_runner
from flows.method import StageClients, prepare
from flows.questions import retrieve_questions

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class ConfigRun:
    """One configuration's per-question rows, its LLM usage, its Listing 13/16 calls, its wall
    seconds and the questions with a failed LLM step."""

    config: SweepConfig
    table: pl.DataFrame
    usage: dict[str, Any]
    reformulation_calls: int
    seconds: float
    failed_questions: list[str]


@dataclass
class SweepOutput:
    """The per-question table (one row per question × configuration, config columns first),
    the LLM usage per configuration label, and the stage summary."""

    table: pl.DataFrame
    usage: dict[str, dict[str, Any]]
    summary: dict[str, Any] = field(default_factory=dict)


def ranking_column(run: pl.DataFrame | pd.DataFrame) -> pl.DataFrame:
    """``question_id`` and ``ranking``: the run's passage ids in rank order, questions by id
    (the committed table lets every metric be recomputed; the methods' runs are pandas)."""
    return (as_polars(run[["question_id", "rank", "passage_id"]])
            .with_columns(pl.col("question_id").cast(pl.String), pl.col("passage_id").cast(pl.String))
            .sort(["question_id", "rank"], maintain_order=True)
            .group_by("question_id", maintain_order=True)
            .agg(pl.col("passage_id").alias("ranking")))


def config_table(params: Params, config: SweepConfig, questions: pl.DataFrame | pd.DataFrame,
                 run: pl.DataFrame | pd.DataFrame) -> pl.DataFrame:
    """Config columns, ``question_id``, the per-question metrics at ``evaluate.ks``, the
    questions' ``gold_reliable`` flag (where they have one) and the ranking."""
    metrics, _ = per_question_frame(run, questions, params.evaluate.ks)
    out = metrics.join(ranking_column(run), on="question_id", how="left")
    if "gold_reliable" in questions.columns:
        flags = as_polars(questions[["question_id", "gold_reliable"]]).with_columns(
            pl.col("question_id").cast(pl.String), pl.col("gold_reliable").cast(pl.Boolean))
        out = out.join(flags, on="question_id", how="left")
    values = config_values(params.evireform, config)
    consts = [pl.lit(values["config"]).alias("config"), pl.lit(values["parameter"]).alias("parameter"),
              pl.lit(values["value"], dtype=pl.Float64).alias("value"),
              pl.lit(values["alpha"], dtype=pl.Float64).alias("alpha"),
              pl.lit(values["beta"], dtype=pl.Float64).alias("beta"),
              pl.lit(values["k_r"], dtype=pl.Int64).alias("k_r"),
              pl.lit(values["max_residual_queries"], dtype=pl.Int64).alias("max_residual_queries")]
    return out.select(*consts, pl.all())


def evaluate_sweep_config(method: Method, ctx: BuildContext, index: EviReformIndex,
                          questions: pl.DataFrame | pd.DataFrame, config: SweepConfig,
                          stage: str) -> ConfigRun:
    """``config`` over the shared index: ``method`` built with its ``evireform`` block and LLM
    clients of its own, every question through :func:`retrieve_questions`."""
    params = ctx.params
    clients = StageClients(stage)
    block = config_params(params.evireform, config)
    built = replace(ctx, params=params.model_copy(update={"evireform": block}), make_client=clients)
    retriever = method.build(built, VARIANT, index)
    start = time.perf_counter()
    results = retrieve_questions(retriever, questions["question_id"], questions["question"],
                                 params.orchestration, label=f"sweep-{config.label}")
    seconds = time.perf_counter() - start
    trace = pl.DataFrame({"rounds_used": [int(r.trace["rounds_used"]) for r in results]})
    table = config_table(params, config, questions, run_frame(results))
    return ConfigRun(config, table, clients.usage(), reformulation_calls(trace), seconds,
                     failed_question_ids([r.trace for r in results]))


def not_run(params: Params, default_calls: int) -> dict[str, dict[str, Any]]:
    """The listed values left out of the sweep and the model calls they need: 0 for a replaying
    parameter, else one Listing 13 call per default reformulation call and value."""
    ev = params.evireform
    return {key: {"values": values,
                  "llm_calls_needed": 0 if replays(key, ev) else default_calls * len(values)}
            for key, values in unrun_values(ev).items()}


@flow(name="evireform-sweep", log_prints=True)
def sweep_flow(paths: DatasetPaths, params: Params, stage: str = "sweep_evireform") -> SweepOutput:
    """Every configuration of ``evireform.sweep`` on ``paths``' questions (module docstring)."""
    if on_dask():
        raise ValueError("sweep_evireform runs its questions in threads of this process: set "
                         "orchestration.task_runner: thread")
    method = get_method("evireform")
    ctx, questions, index = prepare(paths, method, VARIANT, params, StageClients(stage))
    logger = get_run_logger()
    runs: list[ConfigRun] = []
    with method.compute_limits():
        for config in sweep_configs(params.evireform):
            run = evaluate_sweep_config(method, ctx, index, questions, config, stage)
            logger.info("sweep %s: %.1f s, LLM usage %s", config.label, run.seconds, run.usage)
            runs.append(run)
            check_replay(config, params.evireform, run.usage, runs[0].usage)
    default_calls = runs[0].reformulation_calls
    summary = {"questions": len(questions), "configurations": len(runs),
               "default_reformulation_calls": default_calls,
               "default_failed_questions": runs[0].failed_questions,
               "not_run": not_run(params, default_calls),
               "seconds": {r.config.label: round(r.seconds, 2) for r in runs},
               "llm_calls": sum(int(r.usage.get("calls", 0)) for r in runs)}
    table = pl.concat([r.table for r in runs], how="vertical")
    return SweepOutput(table, {r.config.label: r.usage for r in runs}, summary)


def run_sweep(paths: DatasetPaths, params: Params, stage: str = "sweep_evireform") -> SweepOutput:
    """:func:`sweep_flow` on the task runner selected by ``orchestration``."""
    return with_runner(sweep_flow, params.orchestration)(paths, params, stage)
