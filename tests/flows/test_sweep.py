"""EviReform's one-at-a-time sweep (:mod:`evichain.methods.evireform.sweep`, :mod:`flows.sweep`):
the configuration list, the replay rule (α, β, k_r: 0 model calls, checked), L's call count,
and the flow on the Lothair toy corpus with the scripted LLM."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from evichain.config import EmbedParams, LLMParams, OrchestrationParams, ParamsError, parse_params
from evichain.llm.scripted import set_responder
from evichain.methods.evireform.params import EviReformParams, SweepParams
from evichain.methods.evireform.sweep import (
    DEFAULT,
    KEYS,
    SweepConfig,
    SweepReplayError,
    check_replay,
    config_params,
    failed_question_ids,
    replays,
    sweep_configs,
    sweep_figure,
    sweep_summary,
    unrun_values,
)
from tests.methods.evireform.test_evireform_retrieve import respond, write_toy_dataset

EMBED = EmbedParams(batch_size=17)
"""An embedder of its own (the process keeps one per settings), so its cache is this module's."""


def _never(messages: list[dict], model: str) -> str:
    raise AssertionError("the LLM was called")


# --------------------------------------------------------------------------- configurations
def test_configs_are_one_at_a_time_with_the_default_once() -> None:
    ev = EviReformParams()
    configs = sweep_configs(ev)
    labels = [c.label for c in configs]
    assert labels[0] == DEFAULT and len(labels) == len(set(labels))
    s = ev.sweep
    expected = sum(len([v for v in getattr(s, k) if v != getattr(ev, k)]) for k in s.swept)
    assert len(configs) == 1 + expected == 10                  # α 2, β 2, k_r 3, L 2 + default
    default = config_params(ev, configs[0])
    for config in configs[1:]:
        changed = config_params(ev, config)
        diff = [k for k in KEYS if getattr(changed, k) != getattr(default, k)]
        assert diff == [config.parameter], config.label
        assert getattr(changed, config.parameter) == config.value
        assert changed.model_dump(exclude=set(KEYS)) == default.model_dump(exclude=set(KEYS))
    assert [c.parameter for c in configs[1:]] == sorted((c.parameter for c in configs[1:]),
                                                        key=list(s.swept).index)


def test_unswept_parameters_are_listed_with_their_values() -> None:
    ev = EviReformParams(sweep=SweepParams(swept=["alpha", "beta", "k_r"]))
    assert {c.parameter for c in sweep_configs(ev)} == {DEFAULT, "alpha", "beta", "k_r"}
    assert unrun_values(ev) == {"max_residual_queries": [1, 2]}


def test_sweep_params_reject_repeats_and_bad_values() -> None:
    with pytest.raises(ValueError, match="evireform.sweep.alpha repeats"):
        SweepParams(alpha=[0.25, 0.25])
    with pytest.raises(ValueError, match="figure_metrics"):
        SweepParams(metrics=["Recall@5"], figure_metrics=["Chain@5"])
    with pytest.raises(ParamsError, match="evireform.sweep.max_residual_queries"):
        parse_params({"evireform": {"sweep": {"max_residual_queries": [4]}}})


def test_replaying_parameters_must_make_no_model_call() -> None:
    ev = EviReformParams()
    assert replays("alpha", ev) and replays("beta", ev) and replays("k_r", ev)
    assert not replays("max_residual_queries", ev)
    assert not replays("k_r", ev.model_copy(update={"rounds": 3}))   # later rounds read what k_r reached
    none = {"calls": 0, "failures": 0}
    check_replay(SweepConfig("alpha", 0.25), ev, none, none)
    check_replay(SweepConfig("max_residual_queries", 1), ev, {"calls": 5, "failures": 0}, none)
    check_replay(SweepConfig("beta", 0.25), ev, {"calls": 0, "failures": 2}, {"calls": 0, "failures": 2})
    with pytest.raises(SweepReplayError, match="k_r=4 made 1 model call"):
        check_replay(SweepConfig("k_r", 4), ev, {"calls": 1, "failures": 0}, none)
    with pytest.raises(SweepReplayError, match="0 model call.*2 failed request.*the default: 1"):
        check_replay(SweepConfig("beta", 0.75), ev, {"calls": 0, "failures": 2}, {"calls": 0, "failures": 1})


def test_failed_questions_are_those_with_an_llm_status() -> None:
    traces = [{"question_id": "b", "selection_status": "ok", "reformulation_status": "llm_replay_miss"},
              {"question_id": "a", "selection_status": "llm_timeout", "reformulation_status": "no_evidence"},
              {"question_id": "c", "selection_status": "top", "reformulation_status": "off"}]
    assert failed_question_ids(traces) == ["a", "b"]


# --------------------------------------------------------------------------- the flow
def _params(swept: list[str]) -> object:
    """α = 1 (z = s: no propagation) by default, so that β = 1 (s = b: no residual channel)
    must lose the second hop d1, which only the residual query reaches."""
    sweep = SweepParams(alpha=[0.25, 1.0], beta=[0.5, 1.0], k_r=[1, 2], max_residual_queries=[1, 3],
                        swept=swept, metrics=["Recall@2", "Chain@2", "Recall@5"],
                        figure_metrics=["Recall@2"])
    return parse_params({}).model_copy(update={
        "evireform": EviReformParams(top_k=5, alpha=1.0, sweep=sweep), "embed": EMBED,
        "llm": LLMParams(model="scripted/sweep", backoff_base_s=0.0),
        "orchestration": OrchestrationParams(max_workers=2)})


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("EVICHAIN_EMBED_CACHE", str(tmp_path.parent / "sweep-embeddings.sqlite"))
    return write_toy_dataset(tmp_path)


def test_flow_replays_alpha_beta_k_r_with_zero_calls_and_beta_one_changes_rankings(
        toy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from flows.sweep import sweep_flow

    params = _params(["alpha", "beta", "k_r"])
    set_responder(respond)
    first = sweep_flow(toy, params)
    assert first.usage[DEFAULT]["calls"] == 4                         # 2 questions × (select + reformulate)
    assert [first.usage[c]["calls"] for c in ("alpha=0.25", "beta=1", "k_r=1")] == [0, 0, 0]
    assert first.summary["default_reformulation_calls"] == 2
    assert first.summary["not_run"] == {"max_residual_queries": {"values": [1], "llm_calls_needed": 2}}

    monkeypatch.setenv("EVICHAIN_LLM_REPLAY", "1")                  # answers only from the cache
    set_responder(_never)
    again = sweep_flow(toy, params)
    assert all(u["calls"] == 0 and u["failures"] == 0 for u in again.usage.values())
    assert again.table.equals(first.table)

    t = first.table
    assert t.columns[:7] == ["config", "parameter", "value", "alpha", "beta", "k_r", "max_residual_queries"]
    assert t.group_by("config").len().sort("config")["len"].to_list() == [2, 2, 2, 2]
    q1 = t.filter(pl.col("question_id") == "q1")
    ranking = {r["config"]: list(r["ranking"]) for r in q1.iter_rows(named=True)}
    d1_rank = {c: r.index("d1") + 1 if "d1" in r else 99 for c, r in ranking.items()}
    assert d1_rank[DEFAULT] <= 2 < d1_rank["beta=1"]               # β = 1 drops the residual channel

    summary = sweep_summary(t, params.evireform, "toy", first.usage, reliable_only=False)
    by = {c["config"]: c for c in summary["configs"]}
    assert summary["n_questions"] == 2 and list(by) == [DEFAULT, "alpha=0.25", "beta=1", "k_r=1"]
    diff = by["beta=1"]["scores"]["Recall@2"]["vs_default"]
    assert diff["mean"] == pytest.approx(-0.25) and diff["ci_low"] < 0   # q1 loses d1: −0.5 / 2
    assert "vs_default" not in by[DEFAULT]["scores"]["Recall@2"]
    assert by["alpha=0.25"]["llm_usage"]["calls"] == 0
    figure = sweep_figure(summary, params.evireform, tmp_path / "sweep.png",
                          {"max_residual_queries": "1: not run"})
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_flow_fails_loudly_when_a_replaying_configuration_calls_the_model(toy) -> None:  # type: ignore[no-untyped-def]
    from flows.sweep import sweep_flow

    set_responder(lambda messages, model: "not json")              # nothing valid is ever cached
    with pytest.raises(SweepReplayError, match="alpha=0.25 made [1-9]"):
        sweep_flow(toy, _params(["alpha"]))


def test_a_prompt_missing_from_the_recording_fails_alike_and_is_listed(
        toy, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from flows.sweep import sweep_flow

    def q1_only(messages: list[dict], model: str) -> str:
        """Valid answers for q1; nothing valid (so nothing recorded) for q2."""
        return "not json" if "Erstein?" in messages[-1]["content"] else respond(messages, model)

    params = _params(["alpha"])
    default_only = params.evireform.model_copy(update={"sweep": params.evireform.sweep.model_copy(
        update={"swept": []})})
    set_responder(q1_only)
    sweep_flow(toy, params.model_copy(update={"evireform": default_only}))   # the "recording"
    monkeypatch.setenv("EVICHAIN_LLM_REPLAY", "1")
    set_responder(_never)
    out = sweep_flow(toy, params)
    assert out.summary["default_failed_questions"] == ["q2"]
    assert out.usage[DEFAULT]["failures"] == out.usage["alpha=0.25"]["failures"] > 0
    assert out.usage["alpha=0.25"]["calls"] == 0


def test_each_other_value_of_l_needs_one_reformulation_call_per_question(toy) -> None:  # type: ignore[no-untyped-def]
    from flows.sweep import sweep_flow

    set_responder(respond)
    out = sweep_flow(toy, _params(["max_residual_queries"]))
    assert out.usage["max_residual_queries=1"]["calls"] == out.summary["default_reformulation_calls"] == 2
    assert "max_residual_queries" not in out.summary["not_run"]
    assert {k: v["llm_calls_needed"] for k, v in out.summary["not_run"].items()} == \
        {"alpha": 0, "beta": 0, "k_r": 0}                           # the replaying ones need none
