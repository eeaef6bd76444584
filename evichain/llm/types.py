"""Value types of the LLM client: prompts, results, failures and usage."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from string import Template
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class Prompt(Generic[T]):
    """A versioned prompt template with its response schema.

    ``system`` is sent verbatim; ``user`` is a :class:`string.Template` (``$name`` placeholders,
    so JSON braces in the text need no escaping). Bump ``version`` whenever the text or the
    schema changes: the version is part of the cache key.
    """

    name: str
    version: str
    system: str
    user: str
    schema: type[T]

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}"

    def messages(self, **variables: Any) -> list[dict[str, str]]:
        """Render the chat messages; every placeholder must be supplied."""
        user = Template(self.user).substitute(**{k: _as_text(v) for k, v in variables.items()})
        msgs = []
        if self.system:
            msgs.append({"role": "system", "content": self.system})
        msgs.append({"role": "user", "content": user})
        return msgs

    def json_schema(self) -> dict[str, Any]:
        return self.schema.model_json_schema()


def quote_json(value: Any) -> str:
    """Minified JSON of prompt data with ``<`` escaped as ``\\u003c``.

    The escape is invisible to a JSON reader but keeps chat-template tokens such as
    ``<|im_start|>`` inside passage text from being tokenised as special tokens by a local
    model's chat template, so quoted data cannot open a new turn.
    """
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return quote_json(value)


@dataclass
class Usage:
    """Token and cost counters (summed over calls; cache hits cost nothing).

    ``requests`` counts logical requests (one per ``LLMClient.call``: a cache hit, a success
    or a failure) on a client's running total; ``calls`` counts model calls, repairs included.
    """

    requests: int = 0
    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    retries: int = 0
    repairs: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, other: "Usage") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, float | int]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass
class LLMSuccess(Generic[T]):
    """A validated structured response.

    ``usage`` is what this call spent (zero tokens on a cache hit); ``response_tokens`` are
    the (prompt, completion) tokens of the response itself, the same whether it came from
    the model or the cache — stages write these, so their outputs are deterministic.
    """

    value: T
    raw: str
    usage: Usage
    cached: bool
    cache_key: str
    response_tokens: tuple[int, int] = (0, 0)

    ok: bool = field(default=True, init=False)


@dataclass
class LLMFailure:
    """A call that still failed after retries and one repair. Never cached.

    ``kind`` is one of: ``timeout``, ``rate_limit``, ``server_error``, ``connection``,
    ``invalid_json``, ``invalid_schema``, ``context_window`` (the prompt does not fit the
    model's context; a caller may split its input and call again), ``bad_request``,
    ``replay_miss``, ``other``.
    """

    kind: str
    reason: str
    raw: str | None
    usage: Usage
    cache_key: str

    ok: bool = field(default=False, init=False)

    def status_row(self) -> dict[str, str]:
        """The fields a stage records in its status table."""
        return {"status": "failed", "error_kind": self.kind, "error": self.reason[:500]}


LLMResult = LLMSuccess[Any] | LLMFailure


def result_tokens(result: LLMResult) -> tuple[int, int]:
    """(prompt, completion) tokens of a result: the response's own for a success (also on a
    cache hit), what the failed attempts spent for a failure."""
    if isinstance(result, LLMSuccess):
        return result.response_tokens
    return result.usage.prompt_tokens, result.usage.completion_tokens
