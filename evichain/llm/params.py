"""Params of the LLM service (``llm`` block of ``params.yaml``); composed by :mod:`evichain.config`."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import Field

from evichain.params_base import ParamsError, Section


class MissingAPIKey(ParamsError):
    """``llm.api_key_env`` names an environment variable that is not set (or is empty)."""


class LocalLLMParams(Section):
    """Settings of the bundled llama-cpp server (used when ``llm.model`` starts with ``local/``).

    ``backend``: ``llama-server`` (llama.cpp's own, ``parallel`` slots decoded together),
    ``llama-cpp-python`` (one request at a time) or ``auto`` (the first when built, else the
    second with a warning). The backend never enters the LLM cache key: answers recorded with
    one replay under the other. Send ``llm.concurrency`` >= ``parallel`` requests to fill the
    slots."""

    backend: Literal["auto", "llama-server", "llama-cpp-python"] = "auto"
    parallel: int = Field(2, ge=1, le=64)  # best calls/min at 2 on 2 cores: benchmarks/results/llm_throughput.md
    n_ctx: int = Field(8192, ge=512, le=131072)
    n_threads: int = Field(2, ge=1, le=256)
    startup_timeout_s: float = Field(300.0, gt=0)


class FaultParams(Section):
    """Fault injection in the LLM client (reliability drills); fractions of attempts."""

    timeout: float = Field(0.0, ge=0.0, le=1.0)
    rate_limit: float = Field(0.0, ge=0.0, le=1.0)
    server_error: float = Field(0.0, ge=0.0, le=1.0)
    malformed: float = Field(0.0, ge=0.0, le=1.0)
    seed: int = 0


class LLMParams(Section):
    """The one LLM client: any litellm model string, or ``local/<key>`` for the bundled model.

    ``max_failure_rate``: a retrieval stage of an LLM method fails (after writing its tables)
    when more than this fraction of its LLM requests failed after retries and repair — the
    method's fallbacks would otherwise be reported as the method.
    """

    model: str = "local/qwen2.5-coder-1.5b-instruct-q4_k_m"
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    seed: int | None = 0
    max_tokens: int = Field(512, ge=1, le=32768)
    timeout_s: float = Field(600.0, gt=0)
    max_retries: int = Field(4, ge=0, le=20)
    backoff_base_s: float = Field(1.0, ge=0.0)
    backoff_max_s: float = Field(60.0, ge=0.0)
    max_failure_rate: float = Field(0.2, ge=0.0, le=1.0)
    concurrency: int = Field(1, ge=1, le=256)
    json_mode: Literal["schema", "json_object", "none"] = "schema"
    local: LocalLLMParams = LocalLLMParams()
    faults: FaultParams = FaultParams()

    def api_key(self) -> str | None:
        """The key read from the variable ``api_key_env`` names (``None`` without one), or
        :class:`MissingAPIKey`: one line naming the variable and the fix."""
        if not self.api_key_env:
            return None
        value = os.environ.get(self.api_key_env)
        if not value:
            raise MissingAPIKey(f"llm.api_key_env names the environment variable "
                                f"{self.api_key_env}, which is not set: export "
                                f"{self.api_key_env}=<your API key>, or set llm.api_key_env: "
                                f"null for an endpoint without a key")
        return value
