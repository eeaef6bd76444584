"""The one LLM client: every LLM call in evichain goes through :class:`LLMClient`.

Per call (:meth:`LLMClient.call`):

1. render the versioned prompt; compute the content-addressed cache key (model, messages,
   sampling settings, response schema, prompt name@version, cache version);
2. on a cache hit, validate and return (zero tokens, zero cost);
3. otherwise call litellm under a per-model concurrency limit, with a timeout per call and
   exponential backoff with jitter on timeouts, rate limits, server and connection errors
   (the concurrency slot is released while backing off);
4. parse the JSON, validate it against the prompt's pydantic schema (and an optional
   caller check, e.g. "ids must be candidates"); on failure make ONE repair call;
5. cache only validated content. A call that still fails returns :class:`LLMFailure`,
   which the caller records as a status row. Failures are never cached.

Usage (tokens, cost, calls, cache hits, retries, repairs, failures) is summed per client;
stages create one client each and write its usage next to their outputs.

Replay (``EVICHAIN_LLM_REPLAY=1``): answers come only from the cache; no model is started or
called, and a miss is an :class:`LLMFailure` of kind ``replay_miss``. It re-runs a stage from a
recorded cache on a machine without the model (the expected-scores check does this).
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import litellm  # LITELLM_LOCAL_MODEL_COST_MAP is defaulted by evichain/llm/__init__.py first
from pydantic import BaseModel, ValidationError

from evichain.llm.cache import CachedResponse, LLMCache, cache_key
from evichain.llm.faults import FaultPlan, corrupt
from evichain.llm.params import LLMParams
from evichain.llm.types import LLMFailure, LLMResult, LLMSuccess, Prompt, Usage

litellm.telemetry = False
litellm.suppress_debug_info = True
log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)
Check = Callable[[Any], None]

_RETRYABLE: dict[type[Exception], str] = {
    litellm.Timeout: "timeout",
    litellm.RateLimitError: "rate_limit",
    litellm.InternalServerError: "server_error",
    litellm.ServiceUnavailableError: "server_error",
    litellm.BadGatewayError: "server_error",  # 502 (a proxy in front of the model)
    litellm.APIConnectionError: "connection",
}
_SEMAPHORES: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_SEM_LOCK = threading.Lock()


class ResponseInvalid(ValueError):
    """Model output that is not valid JSON for the schema (``kind`` says which)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Endpoint:
    """Where litellm sends a call: the provider model string and its base URL."""

    litellm_model: str
    api_base: str | None
    api_key: str | None
    schema_style: str  # "json_schema" (OpenAI style) | "llama_cpp" | "none"
    slots: int | None = None  # requests the server decodes together (local servers); None: no bound


def _semaphore(model: str, limit: int) -> threading.BoundedSemaphore:
    """The process-wide bound shared by every client of ``model`` with ``limit``
    (``llm.concurrency``); a client with another limit gets its own bound."""
    with _SEM_LOCK:
        if (model, limit) not in _SEMAPHORES:
            _SEMAPHORES[(model, limit)] = threading.BoundedSemaphore(limit)
        return _SEMAPHORES[(model, limit)]


class LLMClient:
    """Cached, retrying, schema-validating LLM client over litellm (see module docstring)."""

    def __init__(
        self,
        params: LLMParams,
        *,
        stage: str = "default",
        cache: LLMCache | None = None,
        faults: FaultPlan | None = None,
    ) -> None:
        self.params = params
        self.stage = stage
        self.cache = cache if cache is not None else LLMCache()
        plan = FaultPlan(**params.faults.model_dump())
        self.faults = faults if faults is not None else FaultPlan.from_env(plan)
        self.usage = Usage()
        self._usage_lock = threading.Lock()
        self._endpoint: Endpoint | None = None
        self._endpoint_lock = threading.Lock()
        self.replay = os.environ.get("EVICHAIN_LLM_REPLAY") == "1"
        if not self.replay:
            params.api_key()  # an unset key stops the caller here, in one line (MissingAPIKey)
        if threading.current_thread() is threading.main_thread() and not self.replay:
            # Resolve now: a bundled local server started from the main thread is tied to this
            # process (it dies with it, even on kill -9); from worker threads it starts lazily.
            self._resolve()

    # ------------------------------------------------------------------ public API
    def call(self, prompt: Prompt[T], *, check: Check | None = None, **variables: Any) -> LLMResult:
        """One structured call; returns :class:`LLMSuccess` or :class:`LLMFailure`."""
        messages = prompt.messages(**variables)
        key = cache_key(
            model=self.params.model,
            messages=messages,
            sampling=self.sampling(),
            schema=prompt.json_schema(),
            prompt=prompt.key,
        )
        hit = self.cache.get(key)
        if hit is not None:
            cached = self._from_cache(hit, prompt, check, key)
            if cached is not None:
                return cached
        return self._call_model(prompt, messages, key, check)

    def map(
        self,
        prompt: Prompt[T],
        items: Sequence[dict[str, Any]],
        *,
        check: Callable[[dict[str, Any]], Check | None] | None = None,
    ) -> list[LLMResult]:
        """Call ``prompt`` for each variable dict concurrently (bounded by ``llm.concurrency``)."""
        def one(vars_: dict[str, Any]) -> LLMResult:
            return self.call(prompt, check=check(vars_) if check else None, **vars_)

        with ThreadPoolExecutor(max_workers=self.params.concurrency) as pool:
            return list(pool.map(one, items))

    def sampling(self) -> dict[str, Any]:
        """Sampling settings that enter the cache key."""
        p = self.params
        return {"temperature": p.temperature, "top_p": p.top_p, "max_tokens": p.max_tokens,
                "seed": p.seed, "json_mode": p.json_mode}

    def concurrency(self) -> int:
        """Requests in flight at most: ``llm.concurrency``, bounded by the slots of a local server
        (llama-server: ``llm.local.parallel``; llama-cpp-python's: 1). More would only queue at
        the server and interleave prompts, which defeats its prompt-prefix reuse (the expansion
        samples and iterative episodes are sent so that one prompt extends the previous)."""
        if self.replay:
            return self.params.concurrency
        slots = self._resolve().slots
        return min(self.params.concurrency, slots) if slots else self.params.concurrency

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under the configured model's tokenizer (litellm's counter)."""
        return int(litellm.token_counter(model=self._tokenizer_model(), text=text))

    # ------------------------------------------------------------------ internals
    def _from_cache(self, hit: CachedResponse, prompt: Prompt[T], check: Check | None,
                    key: str) -> LLMSuccess[T] | None:
        """A validated cache hit, or None when the entry no longer validates."""
        try:
            value = _validate(hit.content, prompt.schema, check)
        except ResponseInvalid:
            log.warning("cached entry %s no longer validates; calling the model", key[:12])
            return None
        self._count(Usage(cache_hits=1))
        return LLMSuccess(value=value, raw=hit.content, usage=Usage(cache_hits=1), cached=True,
                          cache_key=key, response_tokens=(hit.prompt_tokens, hit.completion_tokens))

    def _call_model(self, prompt: Prompt[T], messages: list[dict[str, str]], key: str,
                    check: Check | None) -> LLMResult:
        usage = Usage()
        if self.replay:
            return self._fail(LLMFailure("replay_miss", f"EVICHAIN_LLM_REPLAY=1 and no cached "
                                         f"answer for {prompt.key} (key {key[:12]})", None, usage, key))

        def store_if_valid(resp: CachedResponse) -> None:  # runs while the slot is held
            try:
                _validate(resp.content, prompt.schema, check)
            except ResponseInvalid:
                return
            self.cache.put(key, model=self.params.model, prompt=prompt.key, response=resp)

        raw = self._complete(messages, prompt, key, usage, attempt_base=0, recheck=True,
                             store=store_if_valid)
        if isinstance(raw, LLMFailure):
            return self._fail(raw)
        if raw.from_cache:  # another thread or process answered while this call waited
            cached = self._from_cache(raw, prompt, check, key)
            if cached is not None:
                return cached
            raw = self._complete(messages, prompt, key, usage, attempt_base=0)
            if isinstance(raw, LLMFailure):
                return self._fail(raw)
        try:
            value = _validate(raw.content, prompt.schema, check)
        except ResponseInvalid as first:
            usage.repairs += 1
            repair_msgs = messages + [
                {"role": "assistant", "content": raw.content},
                {"role": "user", "content": _repair_instruction(first)},
            ]
            raw = self._complete(repair_msgs, prompt, key, usage, attempt_base=100)
            if isinstance(raw, LLMFailure):
                return self._fail(raw)
            try:
                value = _validate(raw.content, prompt.schema, check)
            except ResponseInvalid as second:
                return self._fail(LLMFailure(kind=second.kind, reason=str(second), raw=raw.content,
                                             usage=usage, cache_key=key))
        self.cache.put(key, model=self.params.model, prompt=prompt.key, response=raw)
        self._count(usage)
        return LLMSuccess(value=value, raw=raw.content, usage=usage, cached=False, cache_key=key,
                          response_tokens=(usage.prompt_tokens, usage.completion_tokens))

    def _complete(self, messages: list[dict[str, str]], prompt: Prompt[Any], key: str,
                  usage: Usage, attempt_base: int, recheck: bool = False,
                  store: Callable[[CachedResponse], None] | None = None) -> CachedResponse | LLMFailure:
        """The litellm call with retries and backoff; returns content or a failure.

        With ``recheck`` the cache is looked up again once the concurrency slot is held, and
        ``store`` caches a valid response before the slot is released, so identical calls
        queued behind each other make one model call, not several.
        """
        last: tuple[str, str] = ("other", "no attempt made")
        for attempt in range(self.params.max_retries + 1):
            if attempt:
                usage.retries += 1
                time.sleep(self._backoff(attempt))
            try:
                with _semaphore(self.params.model, self.concurrency()):
                    hit = self.cache.get(key) if recheck and attempt == 0 else None
                    if hit is not None:
                        return hit
                    response = self._attempt(messages, prompt, key, usage, attempt_base + attempt)
                    if store is not None:
                        store(response)
                    return response
            except tuple(_RETRYABLE) as exc:  # type: ignore[misc]
                last = (_kind_of(exc), f"{type(exc).__name__}: {exc}")
                log.info("LLM attempt %d failed (%s); retrying", attempt + 1, last[0])
            except litellm.ContextWindowExceededError as exc:  # a BadRequestError: test first
                return LLMFailure(kind="context_window", reason=str(exc), raw=None, usage=usage,
                                  cache_key=key)
            except litellm.BadRequestError as exc:
                return LLMFailure(kind="bad_request", reason=str(exc), raw=None, usage=usage,
                                  cache_key=key)
            except Exception as exc:  # authentication, not-found, provider bugs: not retryable
                return LLMFailure(kind="other", reason=f"{type(exc).__name__}: {exc}", raw=None,
                                  usage=usage, cache_key=key)
        return LLMFailure(kind=last[0], reason=f"after {self.params.max_retries + 1} attempts: "
                          f"{last[1]}", raw=None, usage=usage, cache_key=key)

    def _attempt(self, messages: list[dict[str, str]], prompt: Prompt[Any], key: str,
                 usage: Usage, attempt: int) -> CachedResponse:
        fault = self.faults.draw(key, attempt)
        _raise_fault(fault, self.params.model)
        endpoint = self._resolve()
        response = litellm.completion(
            model=endpoint.litellm_model,
            messages=messages,
            api_base=endpoint.api_base,
            api_key=endpoint.api_key,
            timeout=self.params.timeout_s,
            num_retries=0,
            **self._sampling_kwargs(prompt, endpoint),
        )
        content = response.choices[0].message.content or ""
        pt = int(getattr(response.usage, "prompt_tokens", 0) or 0)
        ct = int(getattr(response.usage, "completion_tokens", 0) or 0)
        cost = _cost(response)
        usage.calls += 1
        usage.prompt_tokens += pt
        usage.completion_tokens += ct
        usage.cost_usd += cost
        if fault == "malformed":
            content = corrupt(content)
        return CachedResponse(content=content, prompt_tokens=pt, completion_tokens=ct, cost_usd=cost)

    def _sampling_kwargs(self, prompt: Prompt[Any], endpoint: Endpoint) -> dict[str, Any]:
        p = self.params
        kwargs: dict[str, Any] = {"temperature": p.temperature, "max_tokens": p.max_tokens}
        if p.top_p != 1.0:
            kwargs["top_p"] = p.top_p
        if p.seed is not None:
            kwargs["seed"] = p.seed
        kwargs.update(_response_format(p.json_mode, prompt, endpoint.schema_style))
        return kwargs

    def _resolve(self) -> Endpoint:
        with self._endpoint_lock:
            if self._endpoint is None:
                self._endpoint = resolve_endpoint(self.params)
            return self._endpoint

    def _tokenizer_model(self) -> str:
        model = self.params.model
        if model.startswith("local/qwen"):
            return "Qwen/Qwen2.5-Coder-1.5B-Instruct"
        return model

    def _backoff(self, attempt: int) -> float:
        base = self.params.backoff_base_s * (2 ** (attempt - 1))
        return min(self.params.backoff_max_s, base) * (0.5 + random.random() / 2)

    def _fail(self, failure: LLMFailure) -> LLMFailure:
        failure.usage.failures += 1
        self._count(failure.usage)
        log.warning("LLM call failed (%s): %s", failure.kind, failure.reason[:200])
        return failure

    def _count(self, usage: Usage) -> None:
        """Add one finished request's usage to the client's total (exactly once per call)."""
        with self._usage_lock:
            self.usage.add(usage)
            self.usage.requests += 1


# ---------------------------------------------------------------------- helpers
def resolve_endpoint(params: LLMParams) -> Endpoint:
    """Map ``llm.model`` to a litellm call target.

    * ``local/<key>``: the bundled GGUF model, served by a llama-cpp server that this process
      starts on 127.0.0.1 (shared by all clients, stopped at exit);
    * ``scripted/<name>``: the offline scripted provider used by tests and drills;
    * anything else: passed to litellm unchanged (``deepseek/...``, ``openai/...``,
      ``ollama/...``, ``hosted_vllm/...``) with ``llm.api_base`` and the key from
      ``llm.api_key_env``.
    """
    api_key = params.api_key()  # MissingAPIKey (a ParamsError): one line, before any call
    if params.model.startswith("local/"):
        from evichain.llm.local_server import acquire_shared_server, choose_backend

        local = params.local
        backend = choose_backend(local.backend)
        # held for the life of the process; stopped by the server module's atexit hook
        server = acquire_shared_server(params.model.removeprefix("local/"), n_ctx=local.n_ctx,
                                       n_threads=local.n_threads, backend=backend,
                                       n_parallel=local.parallel,
                                       startup_timeout=local.startup_timeout_s)
        return Endpoint(f"openai/{server.model_alias}", server.api_base, "none", "llama_cpp",
                        slots=server.n_parallel)
    if params.model.startswith("scripted/"):
        from evichain.llm.scripted import register_scripted_provider

        register_scripted_provider()
        return Endpoint(params.model, None, None, "none")
    return Endpoint(params.model, params.api_base, api_key, "json_schema")


def _response_format(json_mode: str, prompt: Prompt[Any], style: str) -> dict[str, Any]:
    if json_mode == "none" or style == "none":
        return {}
    if json_mode == "json_object":
        return {"response_format": {"type": "json_object"}}
    schema = prompt.json_schema()
    if style == "llama_cpp":
        # llama-cpp-python's server takes the schema inside json_object (it rejects json_schema)
        return {"response_format": {"type": "json_object", "schema": grammar_safe(schema)}}
    return {"response_format": {"type": "json_schema",
                                "json_schema": {"name": prompt.name, "schema": schema}}}


GRAMMAR_MAX_REPEAT = 64


def grammar_safe(schema: Any) -> Any:
    """``schema`` without string length bounds above :data:`GRAMMAR_MAX_REPEAT` characters.

    llama.cpp turns ``maxLength: n`` into n nested grammar rules and refuses (then fails the
    request) beyond a few hundred ("number of rules that are going to be repeated ... exceeds
    sane defaults"). The bound is dropped from the grammar only: the pydantic schema still
    validates the answer and ``llm.max_tokens`` still ends it.
    """
    if isinstance(schema, list):
        return [grammar_safe(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: grammar_safe(v) for k, v in schema.items()}
    for key in ("maxLength", "minLength"):
        if isinstance(out.get(key), int) and out[key] > GRAMMAR_MAX_REPEAT:
            del out[key]
    return out


def _raise_fault(fault: str | None, model: str) -> None:
    if fault == "timeout":
        raise litellm.Timeout("injected timeout", model=model, llm_provider="fault")
    if fault == "rate_limit":
        raise litellm.RateLimitError("injected 429", llm_provider="fault", model=model)
    if fault == "server_error":
        raise litellm.InternalServerError("injected 500", llm_provider="fault", model=model)


def _kind_of(exc: Exception) -> str:
    for cls, kind in _RETRYABLE.items():
        if isinstance(exc, cls):
            return kind
    return "other"


def _cost(response: Any) -> float:
    try:
        return float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:  # unknown (local) models have no price
        return 0.0


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def parse_json_object(content: str) -> Any:
    """Parse the JSON object in ``content`` (tolerating a Markdown code fence)."""
    text = _FENCE.sub("", content.strip()).strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResponseInvalid("invalid_json", f"not valid JSON ({exc.msg} at {exc.pos})") from None


def _validate(content: str, schema: type[T], check: Check | None) -> T:
    data = parse_json_object(content)
    try:
        value = schema.model_validate(data)
    except ValidationError as exc:
        errs = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}"
                         for e in exc.errors()[:5])
        raise ResponseInvalid("invalid_schema", f"schema violation: {errs}") from None
    if check is not None:
        try:
            check(value)
        except ValueError as exc:
            raise ResponseInvalid("invalid_schema", f"check failed: {exc}") from None
    return value


def _repair_instruction(error: ResponseInvalid) -> str:
    return (f"Your reply could not be used: {error}. Reply again with exactly one JSON object "
            "that follows the requested schema, and nothing else.")


def successes(results: Iterable[LLMResult]) -> list[LLMSuccess[Any]]:
    """The successful results of a batch."""
    return [r for r in results if isinstance(r, LLMSuccess)]
