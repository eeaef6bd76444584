"""Shared test setup: offline environment, isolated caches, scripted LLM helpers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

for key, value in {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED": "false",
}.items():
    os.environ.setdefault(key, value)


@pytest.fixture(autouse=True, scope="session")
def _prefect_backend() -> None:
    """One temporary Prefect server + database for the whole session, closed cleanly."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(autouse=True)
def _isolated_llm_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own LLM cache file and no leftover scripted responder."""
    path = tmp_path / "llm-cache.sqlite"
    monkeypatch.setenv("EVICHAIN_LLM_CACHE", str(path))
    monkeypatch.delenv("EVICHAIN_FAULTS", raising=False)
    from evichain.llm.scripted import set_responder

    set_responder(None)
    yield path
    set_responder(None)
