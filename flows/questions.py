"""The one per-question fan-out of every retrieval flow: one Prefect task per question.

A flow builds its retriever once (index, LLM client in the flow's thread, ...), then
:func:`retrieve_questions` submits ``retriever.retrieve(question_id, question)`` for
each question as a task (a retriever that scores questions in bulk, the first-stage BM25 and
dense, offers ``retrieve_batch(question_ids, questions)`` and ``batch_size``: then each task
is a shard of questions, ``batch_size`` of them, or all at once where it is None), reports
progress (:func:`flows.common.collect`) and returns the results in question order. A task
that raises is retried ``orchestration.question_retries`` times, after
``orchestration.question_retry_delay_s`` seconds (LLM failures never raise: the client retries
them and methods record what still failed as trace rows). Retrievers must tolerate a retried
question (the LLM cache answers its repeated calls).

On Dask a built retriever cannot travel (its LLM client holds locks and thread-locals, its
index may be large): :func:`retrieve_on_workers` sends a :class:`WorkerSpec` instead, a small
picklable description of the build, and every worker process builds the retriever from it once
(:func:`built_on_worker`, cached by :attr:`WorkerSpec.key`) and answers its shards of questions
with it. The shards are cut as the thread runner cuts them (one question per task, or
``batch_size`` questions for a bulk retriever, which one worker reports first:
:func:`describe_on_worker`), so both runners give the same run. Each shard returns the
worker's running LLM usage for the build (:class:`WorkerShard`); :func:`worker_usage` sums the
last total of every build (one per worker process). A spec carries the flow's ``EVICHAIN_*`` environment
(caches, replay, scripted responder, plug-in methods, faults), which the worker applies before
it builds or answers (:func:`adopt_env`), so a question runs on a worker as it would in the
flow's process.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from prefect import task
from prefect.cache_policies import NO_CACHE

from evichain.config import OrchestrationParams
from evichain.llm.types import Usage
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


# --------------------------------------------------------------------------- Dask: built on workers
ENV_PREFIX = "EVICHAIN_"
"""The environment a :class:`WorkerSpec` carries from the flow's process to its workers."""

WORKER_BUILDS_KEPT = 2
"""Builds a worker process keeps (the most recently used): a long-lived worker serving run
after run holds at most this many indexes."""


@dataclass
class WorkerBuild:
    """What a worker builds from a spec: the retriever, its running LLM usage
    (``usage()``: a :meth:`Usage.as_dict`-style dict, ``{"calls": 0}`` without clients), the
    context each shard runs in (``limits()``, e.g. one BLAS thread) and a token naming this
    build among every worker's."""

    retriever: Any
    usage: Callable[[], dict[str, Any]]
    limits: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
    token: str = field(default_factory=lambda: uuid.uuid4().hex)


class WorkerSpec(Protocol):
    """A picklable, small description of a retriever build (params, paths, names: never
    tables, indexes or clients). ``key`` names one build (one flow run): equal keys must build
    equal retrievers; ``env`` is the flow's ``EVICHAIN_*`` environment."""

    @property
    def key(self) -> str: ...

    @property
    def env(self) -> Mapping[str, str]: ...

    def build(self) -> WorkerBuild: ...


@dataclass
class WorkerShard:
    """One shard's answers from a worker: the results in order, the worker process and the
    build (:attr:`WorkerBuild.token`) that made them, and the build's LLM usage so far (a
    running total)."""

    results: list[Any]
    process: str
    build: str
    usage: dict[str, Any] = field(default_factory=dict)


PROCESS_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
"""This process, as a worker names itself in :attr:`WorkerShard.process`."""

_BUILDS: OrderedDict[str, WorkerBuild] = OrderedDict()
_BUILDS_LOCK = threading.Lock()


def flow_env() -> dict[str, str]:
    """The ``EVICHAIN_*`` variables of this process (what a spec carries to the workers)."""
    return {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}


def adopt_env(env: Mapping[str, str]) -> None:
    """Make this process's ``EVICHAIN_*`` environment ``env``: its variables set, the others
    removed. A worker keeps it after the shard (a shard of the same run may be running in
    another of its threads); the next spec sets its own."""
    for key in flow_env().keys() - env.keys():
        del os.environ[key]
    os.environ.update(env)


def built_on_worker(spec: WorkerSpec) -> WorkerBuild:
    """The build of ``spec`` in this process: made on first use, then reused by every shard
    with the same :attr:`WorkerSpec.key` (the :data:`WORKER_BUILDS_KEPT` most recent are kept)."""
    with _BUILDS_LOCK:
        if spec.key in _BUILDS:
            _BUILDS.move_to_end(spec.key)
        else:
            _BUILDS[spec.key] = spec.build()
            while len(_BUILDS) > WORKER_BUILDS_KEPT:
                _BUILDS.popitem(last=False)
        return _BUILDS[spec.key]


def batching(retriever: Any) -> tuple[bool, int | None]:
    """``(True, batch_size)`` for a bulk retriever (``retrieve_batch``), else ``(False, None)``."""
    if hasattr(retriever, "retrieve_batch"):
        return True, retriever.batch_size
    return False, None


def worker_batching(spec: WorkerSpec) -> tuple[bool, int | None]:
    """:func:`batching` of this process's build of ``spec``."""
    adopt_env(spec.env)
    return batching(built_on_worker(spec).retriever)


def answer_shard(spec: WorkerSpec, question_ids: list[str], questions: list[str]) -> WorkerShard:
    """One shard of questions through this process's build of ``spec``: ``retrieve_batch`` for
    a bulk retriever, else ``retrieve`` per question; with this process's running LLM usage."""
    adopt_env(spec.env)
    built = built_on_worker(spec)
    with built.limits():
        if batching(built.retriever)[0]:
            results = list(built.retriever.retrieve_batch(question_ids, questions))
        else:
            results = [built.retriever.retrieve(q, t) for q, t in zip(question_ids, questions)]
    return WorkerShard(results, PROCESS_ID, built.token, built.usage())


# The task bodies only call the module functions above: Dask ships a task's function by value
# (the module's name is bound to the Task, not to the function), with copies of the module
# globals it names, whereas a plain function travels by reference and runs on this module's
# state in the worker (its builds, its PROCESS_ID).
@task(cache_policy=NO_CACHE, task_run_name="{label}-build")
def describe_on_worker(spec: WorkerSpec, label: str) -> tuple[bool, int | None]:
    """Build ``spec`` on a worker and say how its retriever takes questions (:func:`batching`)."""
    return worker_batching(spec)


@task(cache_policy=NO_CACHE, task_run_name="{label}-{start}")
def retrieve_on_worker(spec: WorkerSpec, label: str, start: int, question_ids: list[str],
                       questions: list[str]) -> WorkerShard:
    """One shard of questions on a worker (:func:`answer_shard`)."""
    return answer_shard(spec, question_ids, questions)


def sum_usage(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """LLM usage dicts (:meth:`Usage.as_dict`) added field by field; ``{"calls": 0}`` when every
    part is (no client made) or there are none."""
    made = [part for part in parts if dict(part) != {"calls": 0}]
    if not made:
        return {"calls": 0}
    total = Usage()
    for part in made:
        total.add(Usage(**part))
    return total.as_dict()


def worker_usage(shards: Sequence[WorkerShard]) -> dict[str, Any]:
    """LLM usage of a run on workers: per build (one per worker process, or more where a worker
    dropped a build and made it again) the field-wise maximum of its shards' running totals (its
    last total: every field only grows), summed over the builds (:func:`sum_usage`)."""
    last: dict[str, dict[str, Any]] = {}
    for shard in shards:
        seen = last.setdefault(shard.build, dict(shard.usage))
        for name, value in shard.usage.items():
            seen[name] = max(seen.get(name, value), value)
    return sum_usage(list(last.values()))


def retrieve_on_workers(spec: WorkerSpec, question_ids: Sequence[Any], questions: Sequence[Any],
                        orch: OrchestrationParams, label: str,
                        progress: str | None = None) -> tuple[list[Any], dict[str, Any]]:
    """Every question through retrievers the workers build from ``spec`` (module docstring):
    the results in question order and the LLM usage summed over the worker processes
    (:func:`worker_usage`). Shards and retries as :func:`retrieve_questions` makes them."""
    ids, texts = [str(q) for q in question_ids], [str(t) for t in questions]
    if len(ids) != len(texts):
        raise ValueError(f"{len(texts)} questions for {len(ids)} question ids")
    bulk, batch_size = describe_on_worker.submit(spec, label).result()
    size = (batch_size or max(1, len(ids))) if bulk else 1
    one = retrieve_on_worker.with_options(retries=orch.question_retries,
                                          retry_delay_seconds=orch.question_retry_delay_s)
    starts = list(range(0, len(ids), size))
    futures = [one.submit(spec, label, s, ids[s:s + size], texts[s:s + size]) for s in starts]
    parts: list[WorkerShard] = collect(futures, progress or f"{label} questions",
                                       [len(ids[s:s + size]) for s in starts])
    return [result for part in parts for result in part.results], worker_usage(parts)
