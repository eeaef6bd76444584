"""Evaluation flows: per-question retrieval metrics (ir-measures + Chain@K) and EM/F1.

Flows take artifact paths (Prefect records flow parameters, so they stay small) and return the
per-question polars table with the ids it leaves out, keyed as
:func:`evichain.metrics.retrieval.aggregate` counts them (``excluded_empty_gold``: questions with
no gold passage; ``excluded_no_answer``: questions with no gold answer)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from evichain.io import read_table
from evichain.metrics.qa import EXCLUDED_KEY, qa_frame
from evichain.metrics.retrieval import EXCLUDED_ATTR, per_question_frame

Scored = tuple[pl.DataFrame, dict[str, list[str]]]
"""A per-question table and ``{excluded_<why>: sorted question ids}``."""


@task(name="per-question-metrics", cache_policy=NO_CACHE)
def score_run(run: pl.DataFrame, questions: pl.DataFrame, ks: list[int]) -> Scored:
    """:func:`~evichain.metrics.retrieval.per_question_frame` of a run; the excluded ids under
    ``excluded_empty_gold``."""
    table, excluded = per_question_frame(run, questions, ks)
    return table, {EXCLUDED_ATTR: excluded}


@flow(name="evaluate", log_prints=True)
def evaluate_flow(run_path: Path, questions_path: Path, ks: list[int]) -> Scored:
    """Per-question Recall/Chain/Hit@K, MAP@10 and nDCG@10 of a run."""
    return score_run(read_table(run_path), read_table(questions_path), ks)


@task(name="per-question-qa", cache_policy=NO_CACHE)
def score_answers(answers: pl.DataFrame, questions: pl.DataFrame) -> Scored:
    """:func:`~evichain.metrics.qa.qa_frame` of a method's answers; the excluded ids under
    ``excluded_no_answer``."""
    table, excluded = qa_frame(answers, questions)
    return table, {EXCLUDED_KEY: excluded}


@flow(name="evaluate-qa", log_prints=True)
def evaluate_qa_flow(answers_path: Path, questions_path: Path) -> Scored:
    """Per-question EM and F1 of a method's answers (EviReform C.4)."""
    return score_answers(read_table(answers_path), read_table(questions_path))
