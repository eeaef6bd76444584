"""Reliability drill 3 at CI scale: two processes (a stage subprocess and this one) extract
overlapping passages against one LLM cache and one checkpoint directory: both finish, the
cache is sound and holds every passage once, and no passage is called twice except inside the
race window. The larger run: ``python -m scripts.drills.concurrent_writers`` (and the report)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from scripts.drills import concurrent_writers


@pytest.fixture(scope="module")
def drill(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from prefect.settings import get_current_settings

    from scripts.drills.common import patched_env

    with patched_env({"PREFECT_API_URL": str(get_current_settings().api.url)}):
        return concurrent_writers.run(tmp_path_factory.mktemp("concurrent"), n_passages=16,
                                      overlap=8, shard=4, latency_s=0.05, mixed=True,
                                      workers=2, concurrency=2)


def test_both_processes_finish_with_a_sound_cache(drill: dict) -> None:
    assert drill["exit_codes"] == {"A": 0, "B": 0} and drill["all_ok"]
    assert drill["cache_integrity"] == "ok" and drill["invalid_cache_entries"] == 0
    assert drill["cache_entries"] == drill["distinct_passages"] == 24
    assert drill["temp_files_left"] == []
    assert drill["overlap_propositions_identical"]


def test_no_duplicate_work_beyond_the_race_window(drill: dict) -> None:
    """A passage is called twice only when the second process looked it up before the first
    stored it (cache lookups and stores logged in both processes)."""
    assert drill["calls_total"] == drill["distinct_passages"] + drill["duplicate_calls"]
    assert drill["duplicate_calls"] == drill["inside_race_window"] <= 8
    assert drill["beyond_race_window"] == 0


def test_race_window_classification() -> None:
    from scripts.drills.common import Call

    def call(pid: int, ident: str, start: float) -> list[Call]:
        return [Call("S", pid, "extract", ident, start), Call("E", pid, "extract", ident, start + 0.5)]

    calls = call(1, "a", 0.0) + call(2, "a", 0.5) + call(1, "b", 0.0) + call(2, "b", 3.0) \
        + call(1, "d", 0.0) + call(2, "d", 2.5)
    events = [Call("G", 1, "miss", k, 0.0) for k in ("Ka", "Kb", "Kd")] + [
        Call("G", 2, "miss", "Ka", 0.4), Call("P", 1, "put", "Ka", 1.0),   # inside the window
        Call("G", 2, "miss", "Kb", 0.5), Call("P", 1, "put", "Kb", 1.0),   # inside, but the call
        Call("P", 1, "put", "Kd", 1.0), Call("G", 2, "miss", "Kd", 2.0)]   # began late; beyond
    dup = concurrent_writers.duplicates(calls, events, {"a": "Ka", "b": "Kb", "d": "Kd"})
    assert (dup["inside_race_window"], dup["beyond_race_window"]) == (2, 1)
    assert dup["avoidable_duplicates"] == 2                        # b and d started after the put


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: str


def test_identical_calls_queued_for_the_slot_are_answered_from_the_cache(tmp_path: Path) -> None:
    from evichain.config import LLMParams
    from evichain.llm import LLMCache, LLMClient, Prompt
    from evichain.llm.scripted import set_responder

    calls = []

    def slow(messages: list[dict], model: str) -> str:
        calls.append(time.time())
        time.sleep(0.2)
        return json.dumps({"answer": "x"})

    set_responder(slow)
    prompt = Prompt(name="t", version="1", system="Answer.", user="$q", schema=_Answer)
    client = LLMClient(LLMParams(model="scripted/t", concurrency=1, backoff_base_s=0.0),
                       cache=LLMCache(tmp_path / "c.sqlite"))
    threads = [threading.Thread(target=client.call, args=(prompt,), kwargs={"q": "same"})
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and client.usage.cache_hits == 2


@pytest.mark.parametrize("overlap", [0, 17])
def test_an_overlap_outside_the_corpus_is_refused(overlap: int) -> None:
    with pytest.raises(ValueError, match=f"overlap={overlap}: the shared passages must be 1..16"):
        concurrent_writers.corpora_for(16, overlap, "offset")
    with pytest.raises(SystemExit):
        concurrent_writers.main(["--passages", "16", "--overlap", str(overlap)])
