"""An offline litellm provider with scripted behaviour, for tests and drills.

``llm.model: scripted/<anything>`` routes calls here. The responder is a function
``respond(messages: list[dict], model: str) -> str`` set with :func:`set_responder` or named
by ``EVICHAIN_SCRIPTED_LLM=package.module:function`` (so DVC stages started as subprocesses
use it too). It may raise litellm exceptions to script faults. Calls go through litellm's
custom-provider mechanism, so the real client path (usage, retries, parsing) is exercised.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from typing import Any

import litellm
from litellm import CustomLLM
from litellm.types.utils import ModelResponse

Responder = Callable[[list[dict[str, Any]], str], str]
_responder: Responder | None = None
_lock = threading.Lock()
_registered = False


def set_responder(fn: Responder | None) -> None:
    """Install (or clear) the in-process responder."""
    global _responder
    _responder = fn


def _load_responder() -> Responder:
    if _responder is not None:
        return _responder
    spec = os.environ.get("EVICHAIN_SCRIPTED_LLM")
    if not spec or ":" not in spec:
        raise RuntimeError("llm.model is scripted/... but no responder is set: call "
                           "evichain.llm.scripted.set_responder() or set EVICHAIN_SCRIPTED_LLM="
                           "package.module:function")
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


class ScriptedLLM(CustomLLM):
    """litellm custom provider that answers with the scripted responder."""

    def completion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        messages = kwargs.get("messages") or (args[1] if len(args) > 1 else [])
        model = kwargs.get("model", "scripted")
        content = _load_responder()(messages, model)
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
        return _response(content, prompt_tokens)


def _response(content: str, prompt_tokens: int) -> ModelResponse:
    resp = ModelResponse()
    resp.choices[0].message.content = content  # type: ignore[union-attr]
    resp.usage = litellm.Usage(prompt_tokens=prompt_tokens,
                               completion_tokens=len(content.split()),
                               total_tokens=prompt_tokens + len(content.split()))
    resp.model = "scripted"
    return resp


def register_scripted_provider() -> None:
    """Register the ``scripted`` provider with litellm once per process."""
    global _registered
    with _lock:
        if _registered:
            return
        litellm.custom_provider_map = [
            *[p for p in litellm.custom_provider_map if p.get("provider") != "scripted"],
            {"provider": "scripted", "custom_handler": ScriptedLLM()},
        ]
        _registered = True
