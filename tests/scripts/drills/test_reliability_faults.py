"""Reliability drill 1 at CI scale: 30 % injected LLM faults (timeouts, 429s, 500s, truncated
JSON) in the extraction, EviReform retrieval and QA read stages of a real 2Wiki slice built
by the demo rules (6 questions, 24 passages). The stages complete; every failure left after
retries is a status row; the cache holds only valid responses; a clean re-run calls the model
only for what failed. The larger run: ``python -m scripts.drills.faults`` (and the report)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.drills import faults


@pytest.fixture(scope="module")
def drill(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return faults.run(tmp_path_factory.mktemp("faults"), n_questions=6, max_passages=24,
                      rate=0.3, seed=7, retries=1)


def test_fault_spec_sums_to_the_rate() -> None:
    from evichain.llm.faults import FaultPlan

    spec = dict(p.split("=") for p in faults.fault_spec(0.3, 5).split(","))
    assert sum(float(v) for k, v in spec.items() if k != "seed") == pytest.approx(0.3)
    assert FaultPlan(**{k: float(v) for k, v in spec.items() if k != "seed"}).active


@pytest.mark.parametrize("stage", ["extract", "retrieve_evireform", "read"])
def test_stage_completes_and_every_failure_is_a_status_row(drill: dict, stage: str) -> None:
    s = drill[stage]
    assert sum(s["faults_injected"].values()) > 0, s
    assert s["client_failures"] == s["failed_rows"], s           # no failure lost or invented
    assert set(s["failure_kinds"]) <= {"timeout", "rate_limit", "server_error", "invalid_json",
                                       "invalid_schema"}
    assert s["failed_after_rerun"] == 0


@pytest.mark.parametrize("stage", ["extract", "retrieve_evireform", "read"])
def test_clean_rerun_calls_the_model_only_for_what_failed(drill: dict, stage: str) -> None:
    s = drill[stage]
    assert s["repeated_calls"] == 0, s                            # nothing that succeeded
    assert s["rerun_calls_expected"] <= s["rerun_calls"] <= s["rerun_calls_upper"], s
    if stage != "retrieve_evireform":                             # exact for per-item stages
        assert s["rerun_calls"] == s["failed_rows"]


def test_cache_holds_only_valid_responses(drill: dict) -> None:
    assert drill["cache"]["invalid_entries"] == 0 and drill["cache"]["integrity"] == "ok"
    ex = drill["extract"]                                          # failures were not cached
    assert ex["cache_entries_after_faulty_run"] == ex["ok_rows_after_faulty_run"]
    assert drill["totals"]["rows_failed"] >= 1, "this seed injected no lasting failure"
    assert drill["verdict"] == "pass"


def test_invalid_cache_entries_are_detected(tmp_path: Path) -> None:
    """The checker itself: a truncated or off-schema entry is reported."""
    from evichain.llm.cache import CachedResponse, LLMCache
    from scripts.drills.common import invalid_cache_entries

    cache = LLMCache(tmp_path / "c.sqlite")
    for key, content in (("good", '{"answer": "x"}'), ("cut", '{"answer": "x'),
                         ("extra", '{"answer": "x", "why": 1}')):
        cache.put(key, model="m", prompt="qa-reader@1",
                  response=CachedResponse(content=content, prompt_tokens=1, completion_tokens=1,
                                          cost_usd=0.0))
    assert sorted(invalid_cache_entries(tmp_path / "c.sqlite")) == ["cut", "extra"]
