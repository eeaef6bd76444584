"""GraphRAG-Bench Medical flows: answering (Listing 2) and judging, one task per question.

Flow parameters are artifact paths and params sections (never DataFrames). The LLM client of
each stage is created once, in the flow's thread, before tasks run (``stage_client``), so a
bundled local model server belongs to the stage process and usage sums over its tasks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from evichain.config import EmbedParams, LLMParams
from evichain.io import read_table
from evichain.llm import Usage
from evichain.qa.medical import ANSWER_COLUMNS, answer_one
from evichain.qa.medical_eval import answer_failed_row, finalize, with_correctness
from evichain.qa.medical_judge import JudgeSettings, judge_answer
from evichain.qa.medical_params import MedicalQAParams
from flows.common import collect
from flows.read import load_contexts, stage_client


@task(name="medical-answer", task_run_name="answer-{qid}", retries=1, retry_delay_seconds=2,
      cache_policy=NO_CACHE)
def answer_question(llm: LLMParams, stage: str, qid: str, qtype: str, question: str,
                    passages: list[dict[str, str]]) -> dict[str, Any]:
    """Answer one question from its passages (the client retries transient errors itself)."""
    row = answer_one(stage_client(llm, stage), question, passages)
    return {**row, "question_id": qid, "type": qtype,
            "context_passage_ids": [p["passage_id"] for p in passages]}


@flow(name="read-medical", log_prints=True)
def read_medical_flow(questions_path: Path, corpus_path: Path, run_path: Path, k: int,
                      llm: LLMParams, stage: str) -> tuple[pd.DataFrame, Usage]:
    """Answer every question from the top-``k`` passages of a method's run (Listing 2); the
    answers (:data:`ANSWER_COLUMNS`, sorted by ``question_id``) as pandas, which
    stages/read_medical indexes."""
    questions = read_table(questions_path, columns=["question_id", "type", "question"])
    stage_client(llm, stage)  # created (and a local server started) in the flow's thread
    contexts = load_contexts(corpus_path, run_path, k)
    futures = [answer_question.submit(llm, stage, qid, qtype, q, contexts.get(qid, []))
               for qid, qtype, q in questions.iter_rows()]
    rows = collect(futures, f"{stage}: questions answered")
    table = pd.DataFrame(rows, columns=ANSWER_COLUMNS).sort_values("question_id").reset_index(drop=True)
    return table, stage_client(llm, stage).usage


@task(name="medical-judge", task_run_name="judge-{qid}", retries=1, retry_delay_seconds=2,
      cache_policy=NO_CACHE)
def judge_question(llm: LLMParams, stage: str, settings: JudgeSettings, qid: str, qtype: str,
                   question: str, reference: str, answer: str, contexts: list[str]) -> dict[str, Any]:
    """All judge metrics of one answer (see :func:`evichain.qa.medical_judge.judge_answer`)."""
    row = judge_answer(stage_client(llm, stage), qtype, question, reference, answer, contexts, settings)
    return {**row, "question_id": qid, "type": qtype}


def _joined(questions_path: Path, answers_path: Path) -> pl.DataFrame:
    """Questions (in their order) with their answer rows; every question must have one."""
    questions = read_table(questions_path)
    answers = read_table(answers_path)
    answers = answers.drop("type", strict=False).with_columns(pl.lit(True).alias("_answered"))
    merged = questions.join(answers, on="question_id", how="left", maintain_order="left")
    missing = merged.filter(pl.col("_answered").is_null())["question_id"].to_list()
    if missing:
        raise ValueError(f"{answers_path}: no answer row for {len(missing)} question(s), e.g. "
                         f"{missing[:3]}; re-run read_medical")
    return merged.drop("_answered")


def _texts(corpus_path: Path, passage_ids: set[str]) -> dict[str, str]:
    """passage_id → text of the passages in ``passage_ids`` that the corpus has."""
    corpus = read_table(corpus_path, columns=["passage_id", "text"])
    rows = corpus.filter(pl.col("passage_id").is_in(sorted(passage_ids)))
    return dict(rows.iter_rows())


@flow(name="evaluate-medical", log_prints=True)
def evaluate_medical_flow(questions_path: Path, answers_path: Path, corpus_path: Path,
                          judge_llm: LLMParams, medical: MedicalQAParams, embed: EmbedParams,
                          stage: str) -> tuple[pd.DataFrame, Usage]:
    """Judge every answer (benchmark metrics per question type); failed answers score 0."""
    from evichain.embed import get_embedder

    data = _joined(questions_path, answers_path)
    ok = data.filter(pl.col("status") == "ok").rows(named=True)
    texts = _texts(corpus_path, {p for r in ok for p in r["context_passage_ids"] or []})
    settings = JudgeSettings(beta=medical.correctness_beta, max_text_chars=medical.max_text_chars,
                             max_context_chars=medical.max_context_chars)
    stage_client(judge_llm, stage)  # created in the flow's thread
    futures = [judge_question.submit(judge_llm, stage, settings, r["question_id"], r["type"], r["question"],
                                     str(r["answers"][0]), str(r["prediction"]),
                                     [str(texts.get(p, "")) for p in r["context_passage_ids"]])
               for r in ok]
    # pandas from here: the per-question table goes to stages/evaluate_medical, which writes it
    judged = pd.DataFrame(collect(futures, f"{stage}: answers judged"))
    judged = with_correctness(judged, [str(r["prediction"]) for r in ok],
                              [str(r["answers"][0]) for r in ok],
                              lambda t: get_embedder(embed).encode(t), medical.correctness_weights)
    if not judged.empty:
        judged["idk"] = [bool(r["idk"]) for r in ok]
    failed = pd.DataFrame([{**answer_failed_row(r["type"], str(r["error_kind"]), str(r["error"])),
                            "question_id": r["question_id"], "type": r["type"]}
                           for r in data.filter(pl.col("status").ne_missing("ok")).iter_rows(named=True)])
    frames = [f for f in (judged, failed) if not f.empty]
    if not frames:
        raise ValueError(f"{questions_path}: no questions to evaluate")
    per_q = pd.concat(frames, ignore_index=True)
    tokens = {qid: (pt, ct) for qid, pt, ct in
              data.select("question_id", "prompt_tokens", "completion_tokens").iter_rows()}
    per_q["reader_prompt_tokens"] = [int(tokens[q][0]) for q in per_q["question_id"]]
    per_q["reader_completion_tokens"] = [int(tokens[q][1]) for q in per_q["question_id"]]
    return finalize(per_q), stage_client(judge_llm, stage).usage
