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

from evichain.config import ParamsError  # noqa: E402


def run_stage(name: str, body: Callable[[], dict[str, Any] | None]) -> None:
    """Run a stage body; print a one-line summary, or a clear error and exit 2."""
    start = time.perf_counter()
    try:
        summary = body() or {}
    except (ParamsError, FileNotFoundError, ValueError, RuntimeError) as exc:
        print(f"[{name}] error: {exc}", file=sys.stderr)
        sys.exit(2)
    summary["seconds"] = round(time.perf_counter() - start, 2)
    print(f"[{name}] done: {json.dumps(summary, sort_keys=True, default=str)}")


def ensure_parent(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
