"""Shared flow plumbing: the task runner switch, sharding and progress reporting.

``orchestration.task_runner`` selects Prefect's thread pool (default) or a Dask cluster via
prefect-dask: ``dask_address`` connects to a running scheduler (``tcp://host:8786``), and
without an address a local cluster of ``dask_n_workers`` processes is started for the run.
Progress is shown twice: a Prefect progress artifact (visible in the UI when a server runs)
and the flow's log lines.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from prefect import get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.futures import as_completed
from prefect.task_runners import ThreadPoolTaskRunner

from evichain.config import OrchestrationParams

T = TypeVar("T")


def task_runner(orch: OrchestrationParams) -> Any:
    """The Prefect task runner selected by params."""
    if orch.task_runner == "thread":
        return ThreadPoolTaskRunner(max_workers=orch.max_workers)
    from prefect_dask import DaskTaskRunner

    if orch.dask_address:
        return DaskTaskRunner(address=orch.dask_address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": orch.dask_n_workers, "threads_per_worker": 1,
                                          "processes": True, "dashboard_address": None})


def shards(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of at most ``size`` items."""
    for start in range(0, len(items), max(1, size)):
        yield items[start : start + size]


def shard_size(n: int, workers: int, per_worker: int = 4, minimum: int = 16) -> int:
    """A shard size giving each worker a few shards (good progress, little overhead)."""
    return max(minimum, math.ceil(n / max(1, workers * per_worker)))


class Progress:
    """Progress of a fan-out, reported as a Prefect artifact and as log lines (every ~10%)."""

    def __init__(self, total: int, label: str) -> None:
        self.total = max(1, total)
        self.label = label
        self.done = 0
        self._last_pct = -10
        self._artifact = _safe(create_progress_artifact, progress=0.0, description=label)

    def advance(self, n: int = 1) -> None:
        self.done += n
        pct = 100.0 * self.done / self.total
        if self._artifact is not None:
            _safe(update_progress_artifact, artifact_id=self._artifact, progress=pct)
        if pct - self._last_pct >= 10 or self.done >= self.total:
            self._last_pct = pct
            get_run_logger().info("%s: %d/%d (%.0f%%)", self.label, self.done, self.total, pct)


def collect(futures: Sequence[Any], label: str, sizes: Sequence[int] | None = None) -> list[Any]:
    """Results of ``futures`` in submission order. Progress advances as each future finishes,
    in whatever order they finish, by ``sizes[i]`` items (default 1 per future), so one slow
    early task does not hide the progress of the others; the first failure raises at once."""
    weights = list(sizes) if sizes is not None else [1] * len(futures)
    weight = dict(zip(futures, weights, strict=True))
    progress = Progress(sum(weights), label)
    results: dict[Any, Any] = {}
    for fut in as_completed(list(futures)):
        results[fut] = fut.result()
        progress.advance(weight[fut])
    return [results[fut] for fut in futures]


def _safe(fn: Any, **kwargs: Any) -> Any:
    try:
        return fn(**kwargs)
    except Exception:  # progress must never break a run
        return None


def with_runner(flow_obj: Any, orch: OrchestrationParams) -> Any:
    """``flow_obj`` bound to the task runner that ``orchestration`` params select."""
    return flow_obj.with_options(task_runner=task_runner(orch))
