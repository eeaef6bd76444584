"""The one per-question fan-out of every retrieval flow: one Prefect task per question.

A flow builds its retriever once (index, LLM client in the flow's thread, ...), then
:func:`retrieve_questions` submits ``retriever.retrieve(question_id, question, *extra)`` for
each question as a task (``extra``: that question's precomputed inputs, e.g. its embedding or
its rerank pool), reports progress (:func:`flows.common.collect`) and returns the results in
question order. A task that raises is retried ``orchestration.question_retries`` times, after
``orchestration.question_retry_delay_s`` seconds (LLM failures never raise: the client retries
them and methods record what still failed as trace rows). Retrievers must tolerate a retried
question (the LLM cache answers its repeated calls).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from evichain.config import OrchestrationParams
from flows.common import collect


class QuestionFn:
    """A retriever around ``fn(question_id, question, *extra)``, for flows whose per-question
    step is a function rather than a retriever's method."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def retrieve(self, question_id: str, question: str, *extra: Any) -> Any:
        return self.fn(question_id, question, *extra)


@task(cache_policy=NO_CACHE, task_run_name="{label}-{question_id}")
def retrieve_question(retriever: Any, label: str, question_id: str, question: str,
                      extra: tuple[Any, ...] = ()) -> Any:
    """One question through ``retriever`` (``label`` names the task run)."""
    return retriever.retrieve(question_id, question, *extra)


def retrieve_questions(retriever: Any, question_ids: Sequence[Any], questions: Sequence[Any],
                       orch: OrchestrationParams, label: str,
                       extras: Sequence[tuple[Any, ...]] | None = None,
                       progress: str | None = None) -> list[Any]:
    """``retriever.retrieve(qid, question, *extras[i])`` for every question, each a task with
    retries per ``orch``; the results in question order. Ids and questions are passed as
    ``str``; ``progress`` labels the progress report (default ``"<label> questions"``)."""
    one = retrieve_question.with_options(retries=orch.question_retries,
                                         retry_delay_seconds=orch.question_retry_delay_s)
    ids, texts = list(question_ids), list(questions)
    if extras is not None and len(extras) != len(ids):
        raise ValueError(f"{len(extras)} per-question inputs for {len(ids)} questions")
    futures = [one.submit(retriever, label, str(qid), str(text),
                          tuple(extras[n]) if extras is not None else ())
               for n, (qid, text) in enumerate(zip(ids, texts, strict=True))]
    return collect(futures, progress or f"{label} questions")
