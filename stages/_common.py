"""What every stage does first: quiet, offline environment defaults and clean error exits."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evichain.config import ParamsError  # light: pydantic and yaml only, no env-sensitive import
from evichain.llm.failures import check_failure_rate, failed_questions
from flows.stopping import interruptible  # stdlib only at import

__all__ = ["bootstrap_env", "check_failure_rate", "ensure_parent", "failed_questions", "run_stage",
           "write_method_outputs"]

_ENV_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "PREFECT_LOGGING_LEVEL": "INFO",
}


def bootstrap_env() -> None:
    """Set offline/quiet defaults (explicit environment values win).

    Without ``PREFECT_API_URL`` a flow runs on Prefect's temporary local server; its
    task-run recorder is switched off there because it only prints shutdown noise. With a
    server (``make ui``), runs and task progress appear in its UI.
    """
    for key, value in _ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
    if not os.environ.get("PREFECT_API_URL"):
        os.environ.setdefault("PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED", "false")
    logging.getLogger("LiteLLM").setLevel(logging.WARNING)


bootstrap_env()


STAGE_KEPT = ("the LLM cache (every answer received) and the index builders' shard checkpoints; "
              "`dvc repro` resumes from them")
"""What a stage stopped by SIGINT / SIGTERM keeps (the end of its one stop line)."""

_RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")


def _input_errors() -> tuple[type[BaseException], ...]:
    """Errors about the user's inputs (params, source data, model paths, missing artifacts),
    whose one-line message says everything: no traceback helps with them."""
    from evichain.data.sources import SourceDataError
    from evichain.embed.models import ModelNotFound
    from evichain.io import MissingArtifactError

    return (ParamsError, SourceDataError, ModelNotFound, MissingArtifactError)


def _subclass_names(classes: tuple[type[BaseException], ...]) -> tuple[str, ...]:
    names: set[str] = set()
    todo = list(classes)
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo += cls.__subclasses__()
    return tuple(sorted(names))


class _QuietInputErrors(logging.Filter):
    """Drops Prefect's task/flow failure records (tracebacks, retry notices and repeats of the
    message) for input errors, which :func:`run_stage` reports once, cleanly. Other errors keep
    their tracebacks; ``EVICHAIN_TRACEBACKS=1`` keeps everything."""

    def __init__(self) -> None:
        super().__init__()
        self.errors = _input_errors()
        names = _subclass_names(self.errors)
        self.marks = tuple(f"{n}{sep}" for n in names for sep in ("(", ":"))

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            if not isinstance(exc, self.errors):
                return True
            name = type(exc).__name__  # maybe a subclass imported after the stage started
            self.marks = tuple(dict.fromkeys((*self.marks, f"{name}(", f"{name}:")))
            return False
        text = record.getMessage()
        return not any(mark in text for mark in self.marks)


# Read by flows.common.with_runner (kept apart so that a stage imports no flow module to
# name its flow runs: the stages' source deps stay what they import).
_RUN_NAME_ENV = "EVICHAIN_FLOW_RUN_NAME"
_RUN_TAGS_ENV = "EVICHAIN_FLOW_RUN_TAGS"
_VARIANT_STAGES = ("retrieve_evireform", "retrieve_cee", "tune_evireform", "tune_cee")
"""Stages whose label item is ``<dataset>-<variant>`` of the method their name ends with."""


def stage_tags(name: str, tags: dict[str, str] | None = None) -> dict[str, str]:
    """Flow-run tags of the stage labelled ``name`` (``<stage>@<dataset>[-<run>]``): ``stage``,
    ``dataset``, and ``method`` / ``variant`` read from the run (``<method>[-<variant>]``,
    ``rerank-<method>``; a ``-qa`` suffix of ``evaluate`` is ``kind: qa``; the item of
    ``retrieve_evireform@demo-full`` is a variant of ``evireform``). ``tags`` win."""
    stage, _, item = name.partition("@")
    found: dict[str, str] = {"stage": stage}
    dataset, _, run = item.partition("-")
    if dataset:
        found["dataset"] = dataset
    parts = run.split("-") if run else []
    if stage.startswith("evaluate") and parts[-1:] == ["qa"]:
        found["kind"], parts = "qa", parts[:-1]
    if stage in _VARIANT_STAGES:
        found["method"] = stage.split("_", 1)[1]
        parts = ["", *parts] if parts else []
    elif parts[:1] == ["rerank"] and len(parts) > 1:
        parts = parts[1:]
    if parts:
        if parts[0]:
            found["method"] = parts[0]
        if len(parts) > 1:
            found["variant"] = "-".join(parts[1:])
    return {**found, **(tags or {})}


def run_stage(name: str, body: Callable[[], dict[str, Any] | None],
              tags: dict[str, str] | None = None) -> None:
    """Run a stage body; print a one-line summary, or a clear error and exit 2. SIGINT / SIGTERM
    stop it within seconds with the servers it started, exit 130 / 143
    (:func:`flows.stopping.interruptible`).

    The flow runs the body starts through ``flows.common.with_runner`` are named ``name`` and
    tagged ``key:value`` with :func:`stage_tags` (``tags`` add to or override the tags read
    from the label)."""
    start = time.perf_counter()
    quiet = None if os.environ.get("EVICHAIN_TRACEBACKS") == "1" else _QuietInputErrors()
    if quiet is not None:
        for logger in _RUN_LOGGERS:
            logging.getLogger(logger).addFilter(quiet)
    labels = {_RUN_NAME_ENV: name,
              _RUN_TAGS_ENV: ",".join(f"{k}:{v}" for k, v in stage_tags(name, tags).items())}
    saved = {key: os.environ.get(key) for key in labels}
    os.environ.update(labels)
    try:
        with interruptible(STAGE_KEPT):
            summary = body() or {}
    except (ParamsError, FileNotFoundError, ValueError, RuntimeError) as exc:
        print(f"[{name}] error: {exc}", file=sys.stderr)
        sys.exit(2)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if quiet is not None:
            for logger in _RUN_LOGGERS:
                logging.getLogger(logger).removeFilter(quiet)
    summary["seconds"] = round(time.perf_counter() - start, 2)
    print(f"[{name}] done: {json.dumps(summary, sort_keys=True, default=str)}")


def write_method_outputs(dataset: str, method: str, variant: str, usage_name: str,
                         out: Any, max_failure_rate: float) -> dict[str, Any]:
    """Write an LLM method's run, trace and usage summary; return the summary.

    ``out`` has ``run``, ``trace`` and ``summary`` (a flow's retrieval output). Rows are
    sorted so an unchanged re-run writes the same bytes. Then the stage fails if more than
    ``max_failure_rate`` (``llm.max_failure_rate``) of its LLM requests failed, or of its
    questions recorded a failed LLM call (:func:`evichain.llm.failures.check_llm_failures`,
    the rule ``evichain run`` applies too).
    """
    from evichain.io import write_json, write_parquet
    from evichain.llm.failures import check_llm_failures, llm_failure_counts
    from evichain.paths import DatasetPaths

    paths = DatasetPaths(dataset)
    run = out.run.sort_values(["question_id", "rank"], kind="stable").reset_index(drop=True)
    trace = out.trace.sort_values("question_id", kind="stable").reset_index(drop=True)
    write_parquet(run, paths.run(method))
    write_parquet(trace, paths.trace(method))
    summary = {"dataset": dataset, "variant": variant, **out.summary}
    write_json(summary, paths.usage(usage_name))
    check_llm_failures(llm_failure_counts(summary, trace), max_failure_rate,
                       requests_see=paths.usage(usage_name), questions_see=paths.trace(method))
    return summary


def ensure_parent(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
