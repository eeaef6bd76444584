"""Evaluation flows: per-question retrieval metrics (ir-measures + Chain@K) and EM/F1.

Flows take artifact paths (Prefect records flow parameters, so they stay small)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from evichain.io import read_parquet
from evichain.metrics.qa import qa_per_question
from evichain.metrics.retrieval import per_question_metrics


@task(name="per-question-metrics", cache_policy=NO_CACHE)
def score_run(run: pd.DataFrame, questions: pd.DataFrame, ks: list[int]) -> pd.DataFrame:
    return per_question_metrics(run, questions, ks)


@flow(name="evaluate", log_prints=True)
def evaluate_flow(run_path: Path, questions_path: Path, ks: list[int]) -> pd.DataFrame:
    """Per-question Recall/Chain/Hit@K, MAP@10 and nDCG@10 of a run."""
    return score_run(read_parquet(run_path), read_parquet(questions_path), ks)


@task(name="per-question-qa", cache_policy=NO_CACHE)
def score_answers(answers: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    return qa_per_question(answers, questions)


@flow(name="evaluate-qa", log_prints=True)
def evaluate_qa_flow(answers_path: Path, questions_path: Path) -> pd.DataFrame:
    """Per-question EM and F1 of a method's answers (EviReform C.4)."""
    return score_answers(read_parquet(answers_path), read_parquet(questions_path))
