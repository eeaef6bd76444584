"""Shared flow plumbing: the task runner switch, sharding, progress reporting and run names.

``orchestration.task_runner`` selects Prefect's thread pool (default) or a Dask cluster via
prefect-dask: ``dask_address`` connects to a running scheduler (``tcp://host:8786``), and
without an address a local cluster of ``dask_n_workers`` processes is started for the run.
Progress is shown twice: a Prefect progress artifact (visible in the UI when a server runs)
and the flow's log lines (count, percentage, elapsed time, rate and ETA).

A flow started through :func:`with_runner` is named and tagged by its caller: explicitly, or
from ``$EVICHAIN_FLOW_RUN_NAME`` and ``$EVICHAIN_FLOW_RUN_TAGS`` (comma-separated), which the
stages set for the run of their body (``stages._common.run_stage``: ``<stage>@<item>`` and
``stage:``, ``dataset:``, ``method:``, ``variant:`` tags). The environment carries them so
that a stage needs no import of this module (nor of Prefect) to name its flows.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from prefect import get_run_logger, tags
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.context import FlowRunContext
from prefect.futures import as_completed
from prefect.task_runners import ThreadPoolTaskRunner

from evichain.config import OrchestrationParams

T = TypeVar("T")

RUN_NAME_ENV = "EVICHAIN_FLOW_RUN_NAME"
RUN_TAGS_ENV = "EVICHAIN_FLOW_RUN_TAGS"


def task_runner(orch: OrchestrationParams) -> Any:
    """The Prefect task runner selected by params."""
    if orch.task_runner == "thread":
        return ThreadPoolTaskRunner(max_workers=orch.max_workers)
    from prefect_dask import DaskTaskRunner

    if orch.dask_address:
        return DaskTaskRunner(address=orch.dask_address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": orch.dask_n_workers, "threads_per_worker": 1,
                                          "processes": True, "dashboard_address": None})


def on_dask() -> bool:
    """Whether the flow run this is called in submits its tasks to Dask (prefect-dask's
    runner): its tasks then run in other processes, and what they take must be picklable."""
    ctx = FlowRunContext.get()
    if ctx is None or "prefect_dask" not in sys.modules:  # imported by any Dask runner
        return False
    from prefect_dask import DaskTaskRunner

    return isinstance(ctx.task_runner, DaskTaskRunner)


def shards(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of at most ``size`` items."""
    for start in range(0, len(items), max(1, size)):
        yield items[start : start + size]


def shard_size(n: int, workers: int, per_worker: int = 4, minimum: int = 16) -> int:
    """A shard size giving each worker a few shards (good progress, little overhead)."""
    return max(minimum, math.ceil(n / max(1, workers * per_worker)))


def format_duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def format_rate(done: int, elapsed: float, unit: str = "item") -> str:
    """``12.5 items/s`` when at least one item a second goes by, else ``3.2 s/item``."""
    if done <= 0 or elapsed <= 0:
        return f"- {unit}s/s"
    per_second = done / elapsed
    if per_second >= 1:
        return f"{per_second:.0f} {unit}s/s" if per_second >= 100 else f"{per_second:.1f} {unit}s/s"
    per_item = elapsed / done
    return f"{per_item:.0f} s/{unit}" if per_item >= 100 else f"{per_item:.1f} s/{unit}"


class Progress:
    """Progress of a fan-out, reported as a Prefect artifact and as log lines such as
    ``extract propositions (passages): 30/120 (25%), 1m05s elapsed, 2.2 s/passage, ETA 3m15s``.

    A line is logged on the :meth:`advance` that completes another ``every_pct`` percent or
    comes ``every_s`` seconds after the last line, whichever is first, but never within
    ``min_gap_s`` of the last line (the line of the last item always). ``clock`` (seconds,
    monotonic) and ``log`` (one formatted line) are injectable for tests; by default the flow's
    run logger.
    """

    every_pct = 10.0
    every_s = 30.0
    min_gap_s = 1.0

    def __init__(self, total: int, label: str, *, unit: str = "item",
                 clock: Callable[[], float] = time.monotonic,
                 log: Callable[[str], None] | None = None) -> None:
        self.total = max(1, total)
        self.label = label
        self.unit = unit
        self.done = 0
        self.resumed = 0
        self._clock = clock
        self._log = log
        self._start = clock()
        self._last_time = self._start
        self._last_pct = 0.0
        self._artifact = _safe(create_progress_artifact, progress=0.0, description=label)

    def line(self, now: float | None = None) -> str:
        """The progress line as of ``now`` (default: the clock's time)."""
        elapsed = (self._clock() if now is None else now) - self._start
        pct = 100.0 * self.done / self.total
        worked = self.done - self.resumed  # items done in this run: the rate and the ETA
        if self.done >= self.total:
            eta = "done"
        elif worked > 0 and elapsed > 0:
            eta = "ETA " + format_duration(elapsed / worked * (self.total - self.done))
        else:
            eta = "ETA ?"
        resumed = f", {self.resumed} resumed" if self.resumed else ""
        return (f"{self.label}: {self.done}/{self.total} ({pct:.0f}%{resumed}), "
                f"{format_duration(elapsed)} elapsed, {format_rate(worked, elapsed, self.unit)}, "
                f"{eta}")

    def resume(self, n: int) -> None:
        """Count ``n`` items done by an earlier run (from checkpoints): in the total done, not
        in the rate or the ETA."""
        self.resumed += n
        self.advance(n)

    def advance(self, n: int = 1) -> None:
        self.done += n
        pct = 100.0 * self.done / self.total
        if self._artifact is not None:
            _safe(update_progress_artifact, artifact_id=self._artifact, progress=pct)
        now = self._clock()
        since = now - self._last_time
        due = pct - self._last_pct >= self.every_pct or since >= self.every_s
        if self.done >= self.total or (due and since >= self.min_gap_s):
            self._last_pct, self._last_time = pct, now
            text = self.line(now)
            if self._log is not None:
                self._log(text)
            else:
                get_run_logger().info("%s", text)


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


def run_labels() -> tuple[str | None, tuple[str, ...]]:
    """The flow-run name and tags the environment asks for (see the module docstring)."""
    name = os.environ.get(RUN_NAME_ENV) or None
    tag_list = tuple(t.strip() for t in os.environ.get(RUN_TAGS_ENV, "").split(",") if t.strip())
    return name, tag_list


def with_runner(flow_obj: Any, orch: OrchestrationParams, run_name: str | None = None,
                run_tags: Sequence[str] | None = None) -> Any:
    """``flow_obj`` bound to the task runner that ``orchestration`` params select, its runs
    named ``run_name`` and tagged ``run_tags`` (default: :func:`run_labels`; unnamed and
    untagged when neither says)."""
    env_name, env_tags = run_labels()
    name = run_name if run_name is not None else env_name
    chosen_tags = tuple(run_tags) if run_tags is not None else env_tags
    options: dict[str, Any] = {"task_runner": task_runner(orch)}
    if name:
        options["flow_run_name"] = lambda: name  # a callable: no str.format of the name
    bound = flow_obj.with_options(**options)
    if not chosen_tags:
        return bound

    def tagged(*args: Any, **kwargs: Any) -> Any:
        with tags(*chosen_tags):
            return bound(*args, **kwargs)

    return tagged
