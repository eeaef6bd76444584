"""The one per-question fan-out of every retrieval flow: one Prefect task per question.

A flow builds its retriever once (index, LLM client in the flow's thread, ...), then
:func:`retrieve_questions` submits ``retriever.retrieve(question_id, question)`` for
each question as a task (a retriever that scores questions in bulk, the first-stage BM25 and
dense, offers ``retrieve_batch(question_ids, questions)`` and ``batch_size``: then each task
is a shard of questions, ``batch_size`` of them, or all at once where it is None), reports progress (:func:`flows.common.collect`) and returns the results in
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
    """A retriever around ``fn(question_id, question)``, for flows whose per-question step is a
    function rather than a retriever's method."""

    def __init__(self, fn: Callable[[str, str], Any]) -> None:
        self.fn = fn

    def retrieve(self, question_id: str, question: str) -> Any:
        return self.fn(question_id, question)


@task(cache_policy=NO_CACHE, task_run_name="{label}-{question_id}")
def retrieve_question(retriever: Any, label: str, question_id: str, question: str) -> Any:
    """One question through ``retriever`` (``label`` names the task run)."""
    return retriever.retrieve(question_id, question)


@task(cache_policy=NO_CACHE, task_run_name="{label}-batch-{start}")
def retrieve_batch(retriever: Any, label: str, start: int, question_ids: list[str],
                   questions: list[str]) -> list[Any]:
    """One shard of questions through ``retriever.retrieve_batch``."""
    return list(retriever.retrieve_batch(question_ids, questions))


def _batches(retriever: Any, ids: list[str], texts: list[str], orch: OrchestrationParams,
             label: str, progress: str | None) -> list[Any]:
    """Shards of ``retriever.batch_size`` questions (all at once for None), one task each."""
    size = retriever.batch_size or max(1, len(ids))
    one = retrieve_batch.with_options(retries=orch.question_retries,
                                      retry_delay_seconds=orch.question_retry_delay_s)
    starts = list(range(0, len(ids), size))
    futures = [one.submit(retriever, label, s, ids[s:s + size], texts[s:s + size]) for s in starts]
    parts = collect(futures, progress or f"{label} questions", [len(ids[s:s + size]) for s in starts])
    return [result for part in parts for result in part]


def retrieve_questions(retriever: Any, question_ids: Sequence[Any], questions: Sequence[Any],
                       orch: OrchestrationParams, label: str,
                       progress: str | None = None) -> list[Any]:
    """``retriever.retrieve(qid, question)`` for every question, each a task with retries per
    ``orch`` (or shards through ``retrieve_batch``, module docstring); the results in question
    order. Ids and questions are passed as ``str``; ``progress`` labels the progress report
    (default ``"<label> questions"``)."""
    ids, texts = [str(q) for q in question_ids], [str(t) for t in questions]
    if len(ids) != len(texts):
        raise ValueError(f"{len(texts)} questions for {len(ids)} question ids")
    if hasattr(retriever, "retrieve_batch"):
        return _batches(retriever, ids, texts, orch, label, progress)
    one = retrieve_question.with_options(retries=orch.question_retries,
                                         retry_delay_seconds=orch.question_retry_delay_s)
    futures = [one.submit(retriever, label, qid, text) for qid, text in zip(ids, texts)]
    return collect(futures, progress or f"{label} questions")
