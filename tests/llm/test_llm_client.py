"""The LLM client: cache, key, retries, repair, failures, concurrent writers."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

import litellm
import pytest
from pydantic import BaseModel, ConfigDict

from evichain.config import LLMParams
from evichain.llm import LLMCache, LLMClient, LLMFailure, LLMSuccess, Prompt
from evichain.llm.faults import FaultPlan
from evichain.llm.scripted import set_responder


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: str


QA = Prompt(name="qa", version="1", system="Answer in JSON.", user="Question: $q", schema=Answer)


class Script:
    """A responder that replays a list of outputs (str or exception) and counts calls."""

    def __init__(self, *outputs: object) -> None:
        self.outputs = list(outputs)
        self.calls = 0
        self.seen: list[list[dict]] = []

    def __call__(self, messages: list[dict], model: str) -> str:
        self.calls += 1
        self.seen.append(messages)
        out = self.outputs.pop(0) if len(self.outputs) > 1 else self.outputs[0]
        if isinstance(out, Exception):
            raise out
        return str(out)


def client(tmp_path: Path, **overrides: object) -> LLMClient:
    settings: dict[str, object] = {"model": "scripted/test", "backoff_base_s": 0.0, "max_retries": 3}
    params = LLMParams(**{**settings, **overrides})
    return LLMClient(params, stage="test", cache=LLMCache(tmp_path / "c.sqlite"))


def test_cache_miss_then_hit(tmp_path: Path) -> None:
    script = Script('{"answer": "Paris"}')
    set_responder(script)
    c = client(tmp_path)
    first, second = c.call(QA, q="capital?"), c.call(QA, q="capital?")
    assert isinstance(first, LLMSuccess) and not first.cached
    assert isinstance(second, LLMSuccess) and second.cached and second.value.answer == "Paris"
    assert script.calls == 1
    assert c.usage.calls == 1 and c.usage.cache_hits == 1 and c.usage.prompt_tokens > 0


def test_key_includes_model_prompt_version_and_sampling(tmp_path: Path) -> None:
    script = Script('{"answer": "x"}')
    set_responder(script)
    cache = LLMCache(tmp_path / "c.sqlite")
    base = LLMParams(model="scripted/a", backoff_base_s=0.0)
    LLMClient(base, cache=cache).call(QA, q="q")
    LLMClient(base.model_copy(update={"model": "scripted/b"}), cache=cache).call(QA, q="q")
    qa2 = Prompt(name="qa", version="2", system=QA.system, user=QA.user, schema=Answer)
    LLMClient(base, cache=cache).call(qa2, q="q")
    LLMClient(base.model_copy(update={"temperature": 0.7}), cache=cache).call(QA, q="q")
    LLMClient(base, cache=cache).call(QA, q="q")  # identical to the first: a hit
    assert script.calls == 4
    assert cache.count() == 4


@pytest.mark.parametrize("exc", [
    litellm.Timeout("t", model="m", llm_provider="scripted"),
    litellm.RateLimitError("429", llm_provider="scripted", model="m"),
    litellm.InternalServerError("500", llm_provider="scripted", model="m"),
])
def test_retry_on_transient_errors(tmp_path: Path, exc: Exception) -> None:
    script = Script(exc, exc, '{"answer": "ok"}')
    set_responder(script)
    c = client(tmp_path)
    result = c.call(QA, q="q")
    assert isinstance(result, LLMSuccess) and result.value.answer == "ok"
    assert script.calls == 3 and c.usage.retries == 2


def test_retries_exhausted_is_failure_and_not_cached(tmp_path: Path) -> None:
    script = Script(litellm.RateLimitError("429", llm_provider="scripted", model="m"))
    set_responder(script)
    c = client(tmp_path, max_retries=2)
    result = c.call(QA, q="q")
    assert isinstance(result, LLMFailure) and result.kind == "rate_limit"
    assert script.calls == 3
    assert c.cache.count() == 0
    assert result.status_row()["status"] == "failed"


def test_invalid_json_repaired_once(tmp_path: Path) -> None:
    script = Script('{"answer": "Par', '{"answer": "Paris"}')
    set_responder(script)
    c = client(tmp_path)
    result = c.call(QA, q="q")
    assert isinstance(result, LLMSuccess) and result.value.answer == "Paris"
    assert script.calls == 2 and c.usage.repairs == 1
    repair_turn = script.seen[1]
    assert repair_turn[-2] == {"role": "assistant", "content": '{"answer": "Par'}
    assert "could not be used" in repair_turn[-1]["content"]
    assert json.loads(c.cache.get(result.cache_key).content) == {"answer": "Paris"}


def test_invalid_twice_is_failure_and_never_cached(tmp_path: Path) -> None:
    script = Script("not json at all", '{"answer": 3, "extra": 1}')
    set_responder(script)
    c = client(tmp_path)
    result = c.call(QA, q="q")
    assert isinstance(result, LLMFailure) and result.kind == "invalid_schema"
    assert c.cache.count() == 0 and c.usage.failures == 1
    set_responder(Script('{"answer": "fine"}'))
    again = c.call(QA, q="q")  # the failure was not cached: the model is asked again
    assert isinstance(again, LLMSuccess) and not again.cached


def test_requests_count_hits_successes_and_failures_once(tmp_path: Path) -> None:
    set_responder(Script('{"answer": "Paris"}', '{"answer": "Pa', "still not json"))
    c = client(tmp_path)
    results = [c.call(QA, q="a"), c.call(QA, q="a"), c.call(QA, q="b")]
    assert [type(r).__name__ for r in results] == ["LLMSuccess", "LLMSuccess", "LLMFailure"]
    assert (c.usage.requests, c.usage.cache_hits, c.usage.failures, c.usage.repairs) == (3, 1, 1, 1)
    assert c.usage.calls == 3                                # model calls: 1 + (1 and its repair)


def test_caller_check_rejects_out_of_schema_values(tmp_path: Path) -> None:
    set_responder(Script('{"answer": "Berlin"}', '{"answer": "Berlin"}'))

    def only_paris(value: Answer) -> None:
        if value.answer != "Paris":
            raise ValueError(f"answer {value.answer!r} is not a candidate")

    result = client(tmp_path).call(QA, q="q", check=only_paris)
    assert isinstance(result, LLMFailure) and "not a candidate" in result.reason


def test_fault_injection_is_survived_by_retries(tmp_path: Path) -> None:
    set_responder(Script('{"answer": "ok"}'))
    c = LLMClient(LLMParams(model="scripted/t", backoff_base_s=0.0, max_retries=6),
                  cache=LLMCache(tmp_path / "c.sqlite"),
                  faults=FaultPlan(timeout=0.15, rate_limit=0.15, server_error=0.1, malformed=0.1, seed=3))
    results = [c.call(QA, q=f"question {i}") for i in range(40)]
    ok = [r for r in results if isinstance(r, LLMSuccess)]
    assert len(ok) >= 36 and c.usage.retries > 0
    for r in ok:  # nothing malformed reached the cache
        assert json.loads(c.cache.get(r.cache_key).content) == {"answer": "ok"}


def _writer(path: str, start: int, n: int) -> None:
    from evichain.llm.cache import CachedResponse, LLMCache

    cache = LLMCache(path)
    for i in range(start, start + n):
        cache.put(f"k{i}", model="m", prompt="p@1",
                  response=CachedResponse(content=json.dumps({"i": i}), prompt_tokens=1,
                                          completion_tokens=1, cost_usd=0.0))


def test_two_processes_write_the_cache_at_once(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite")
    LLMCache(path)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, s, 300)) for s in (0, 150)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cache = LLMCache(path)
    assert cache.count() == 450
    assert json.loads(cache.get("k299").content) == {"i": 299}


def test_grammar_safe_drops_long_string_bounds_only() -> None:
    from evichain.llm.client import grammar_safe

    schema = {"type": "object", "properties": {
        "passage": {"type": "string", "minLength": 1, "maxLength": 1500},
        "ids": {"type": "array", "maxItems": 12, "items": {"type": "string", "maxLength": 8}}}}
    safe = grammar_safe(schema)
    assert "maxLength" not in safe["properties"]["passage"]
    assert safe["properties"]["passage"]["minLength"] == 1
    assert safe["properties"]["ids"]["maxItems"] == 12
    assert safe["properties"]["ids"]["items"]["maxLength"] == 8
    assert schema["properties"]["passage"]["maxLength"] == 1500  # the input is not modified
