"""The hosted-style fake endpoint and the LLM client against it: answers, 429 and timeout
retries, and no loss or duplicates at concurrency 8."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from evichain.llm.cache import LLMCache
from evichain.llm.client import LLMClient
from evichain.llm.fake_endpoint import (
    EndpointFaults,
    FakeEndpoint,
    digest_answer,
    max_overlap,
    request_id,
)
from evichain.llm.params import LLMParams
from evichain.llm.types import LLMSuccess
from evichain.qa.prompts import READER

KEY_ENV = "EVICHAIN_FAKE_ENDPOINT_KEY"
MESSAGES = [{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": "q one"}]


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "test-key")


def post(api_base: str, messages: list[dict[str, str]]) -> tuple[int, dict[str, str], dict[str, Any]]:
    """POST a chat completion with urllib; (status, headers, JSON body), errors included."""
    req = urllib.request.Request(f"{api_base}/chat/completions", method="POST",
                                 data=json.dumps({"model": "fake", "messages": messages}).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


def client(api_base: str, tmp_path: Path, **overrides: Any) -> LLMClient:
    params = LLMParams(**{"model": "openai/fake", "api_base": api_base, "api_key_env": KEY_ENV,
                          "backoff_base_s": 0.0, "max_retries": 3, **overrides})
    return LLMClient(params, stage="test", cache=LLMCache(tmp_path / "c.sqlite"))


def reader_items(n: int) -> list[dict[str, Any]]:
    return [{"payload": {"question": f"question {i}?", "evidence": [{"title": "t", "text": f"text {i}"}]}}
            for i in range(n)]


def test_answers_in_openai_shape_and_records() -> None:
    with FakeEndpoint(latency_s=0.01) as ep:
        status, _, body = post(ep.api_base, MESSAGES)
        stats, records = ep.stats(), ep.records()
    assert status == 200
    assert body["choices"][0]["message"]["content"] == digest_answer(MESSAGES)
    assert body["usage"] == {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    assert [r.request_id for r in records] == [request_id(MESSAGES)]
    assert stats.answered == stats.requests == stats.distinct == 1 and stats.duplicated == 0


def test_429_carries_retry_after() -> None:
    faults = EndpointFaults(rate_limit=1.0, retry_after_s=1.5, faulted_attempts=1)
    with FakeEndpoint(faults=faults) as ep:
        first, second = post(ep.api_base, MESSAGES), post(ep.api_base, MESSAGES)
        stats = ep.stats()
    assert first[0] == 429 and first[1]["Retry-After"] == "2" and first[1]["retry-after-ms"] == "1500"
    assert second[0] == 200
    assert stats.rate_limited == 1 and stats.answered == 1 and stats.early_retries == 1


def test_client_retries_a_429(tmp_path: Path) -> None:
    faults = EndpointFaults(rate_limit=1.0, retry_after_s=0.0, faulted_attempts=1)
    with FakeEndpoint(latency_s=0.01, faults=faults) as ep:
        llm = client(ep.api_base, tmp_path)
        result = llm.call(READER, **reader_items(1)[0])
        stats = ep.stats()
    assert isinstance(result, LLMSuccess)
    assert llm.usage.retries == 1 and llm.usage.calls == 1 and llm.usage.failures == 0
    assert stats.requests == 2 and stats.rate_limited == 1 and stats.answered == 1


@pytest.mark.parametrize("status", [500, 502, 503])
def test_client_retries_a_5xx(tmp_path: Path, status: int) -> None:
    faults = EndpointFaults(server_error=1.0, server_statuses=(status,), faulted_attempts=1)
    with FakeEndpoint(latency_s=0.01, faults=faults) as ep:
        llm = client(ep.api_base, tmp_path)
        result = llm.call(READER, **reader_items(1)[0])
        stats = ep.stats()
    assert isinstance(result, LLMSuccess), result
    assert llm.usage.retries == 1 and stats.server_errors == 1 and stats.answered == 1


def test_client_retries_a_timeout(tmp_path: Path) -> None:
    faults = EndpointFaults(timeout=1.0, hold_s=1.0, faulted_attempts=1)
    with FakeEndpoint(latency_s=0.01, faults=faults) as ep:
        llm = client(ep.api_base, tmp_path, timeout_s=0.3)
        result = llm.call(READER, **reader_items(1)[0])
        stats = ep.stats()
    assert isinstance(result, LLMSuccess)
    assert llm.usage.retries == 1 and llm.usage.calls == 1
    assert stats.timeouts == 1 and stats.answered == 1 and stats.duplicated == 0


def test_concurrency_8_no_loss_no_duplicates(tmp_path: Path) -> None:
    faults = EndpointFaults(rate_limit=0.1, server_error=0.1, timeout=0.05, retry_after_s=0.0,
                            hold_s=0.6, server_statuses=(500, 502, 503), seed=3)
    items = reader_items(64)
    with FakeEndpoint(latency_s=0.05, jitter_s=0.02, faults=faults, seed=3) as ep:
        llm = client(ep.api_base, tmp_path, timeout_s=0.3, concurrency=8, backoff_base_s=0.01,
                     max_retries=6)
        results = llm.map(READER, items)
        stats = ep.stats()
    expected = [json.loads(digest_answer(READER.messages(**it)))["answer"] for it in items]
    assert [r.value.answer if isinstance(r, LLMSuccess) else None for r in results] == expected
    assert stats.rate_limited + stats.server_errors + stats.timeouts > 0  # the faults did happen
    assert stats.answered == stats.distinct == len(items)
    assert stats.duplicated == 0 and stats.resent_after_answer == 0
    assert llm.usage.calls == stats.answered
    assert llm.usage.retries == stats.rate_limited + stats.server_errors + stats.timeouts + stats.undelivered
    assert 1 <= stats.max_in_flight <= 8


def test_fault_draws_are_seeded_and_near_their_fractions() -> None:
    faults = EndpointFaults(rate_limit=0.2, server_error=0.1, timeout=0.05, hold_s=1.0, seed=7)
    draws = [faults.draw(f"id{i}", 0) for i in range(4000)]
    assert draws == [faults.draw(f"id{i}", 0) for i in range(4000)]
    share = {k: sum(o == k for o, _ in draws) / len(draws) for k in ("rate_limit", "server_error", "timeout")}
    assert share["rate_limit"] == pytest.approx(0.2, abs=0.03)
    assert share["server_error"] == pytest.approx(0.1, abs=0.03)
    assert share["timeout"] == pytest.approx(0.05, abs=0.02)
    assert {s for o, s in draws if o == "server_error"} == {500, 502, 503}
    assert {s for o, s in draws if o == "rate_limit"} == {429}
    assert EndpointFaults(rate_limit=1.0, faulted_attempts=1).draw("x", 1) == ("ok", 200)


@pytest.mark.parametrize("kwargs, message", [
    ({"rate_limit": 0.6, "server_error": 0.6}, "sum to"),
    ({"timeout": 0.1}, "hold_s"),
    ({"rate_limit": -0.1}, r"\[0, 1\]"),
    ({"server_error": 0.1, "server_statuses": (404,)}, "5xx"),
])
def test_fault_settings_are_validated(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EndpointFaults(**kwargs)


def test_unknown_route_is_404() -> None:
    with FakeEndpoint() as ep:
        req = urllib.request.Request(f"{ep.api_base}/completions", method="POST", data=b"{}")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=5)
        assert ep.stats().requests == 0
    assert err.value.code == 404


def test_max_overlap_counts_half_open_intervals() -> None:
    assert max_overlap([]) == 0
    assert max_overlap([(0.0, 1.0), (1.0, 2.0)]) == 1  # one ends as the next starts
    assert max_overlap([(0.0, 3.0), (1.0, 2.0), (1.5, 4.0), (3.5, 5.0)]) == 3
