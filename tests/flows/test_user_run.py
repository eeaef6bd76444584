"""``evichain run``: registered methods on a user's own JSONL files, end to end (real MiniLM
embeddings; the LLM method with a scripted model)."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import typer
import yaml
from typer.testing import CliRunner

from evichain.io import read_json, read_parquet
from evichain.llm.scripted import set_responder
from flows.cli import app, run
from tests.fixtures.lothair import USER_PASSAGES, write_jsonl, write_user_corpus


@pytest.fixture()
def user_files(tmp_path: Path) -> dict[str, Path]:
    corpus = write_user_corpus(tmp_path / "corpus.jsonl")
    questions = write_jsonl(tmp_path / "questions.jsonl", [
        {"id": "q1", "question": "When did Lothair II's mother die?", "answers": ["20 March 851"]},
        {"id": "q2", "question": "Which lake lies on the north side of the Alps?"},
    ])
    gold = write_jsonl(tmp_path / "gold.jsonl", [
        {"question_id": "q1", "passage_id": "d1"}, {"question_id": "q1", "passage_id": "d2"},
        {"question_id": "q2", "passage_id": "d5"},
    ])
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({
        "llm": {"model": "scripted/user-run", "backoff_base_s": 0.0},
        "evireform": {"index": {"extractor": "sentences"}},
        "orchestration": {"max_workers": 2},
    }), encoding="utf-8")
    return {"corpus": corpus, "questions": questions, "gold": gold, "params": params,
            "out": tmp_path / "out"}


@dataclass
class Result:
    exit_code: int
    output: str


def _invoke(files: dict[str, Path], *extra: str, gold: bool = True) -> Result:
    """The ``run`` command called in-process (Prefect's log handlers keep pytest's streams,
    which a CliRunner would close after its first invocation)."""
    opts = dict(zip(extra[::2], extra[1::2]))
    kwargs: dict[str, Any] = {"method": opts["--method"], "variant": opts.get("--variant"),
                              "corpus": files["corpus"], "questions": files["questions"],
                              "gold": files["gold"] if gold else None, "out": files["out"],
                              "params_file": files["params"], "index_like": opts.get("--index-like"),
                              "seconds_per_call": None}
    buffer = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        try:
            run(**kwargs)
        except typer.Exit as exc:
            code = exc.exit_code
    return Result(code, buffer.getvalue())


def test_dense_run_in_user_ids_with_metrics(user_files: dict[str, Path]) -> None:
    result = _invoke(user_files, "--method", "dense")
    assert result.exit_code == 0, result.output
    run = read_parquet(user_files["out"] / "dense.parquet")
    assert set(run["passage_id"]) <= {p[0] for p in USER_PASSAGES}          # the user's own ids
    top = run[run["question_id"] == "q2"].sort_values("rank")["passage_id"].iloc[0]
    assert top == "d5"
    trec = (user_files["out"] / "dense.trec").read_text().splitlines()
    assert len(trec) == len(run) and trec[0].split()[1] == "Q0"
    metrics = read_json(user_files["out"] / "dense-metrics.json")
    per_q = read_parquet(user_files["out"] / "dense-per_question.parquet")
    assert metrics["n_questions"] == 2
    assert metrics["Recall@5"] == pytest.approx(per_q["Recall@5"].mean())
    assert per_q.set_index("question_id").loc["q2", "Recall@1"] == 1.0
    assert "metrics:" in result.output


def _scripted(messages: list[dict[str, Any]], model: str) -> str:
    """Selection: the first 3 candidates; reformulation: the observed passages' titles."""
    system, data = messages[0]["content"], json.loads(messages[-1]["content"])
    if system.startswith("You compile"):
        return json.dumps({"selected_proposition_ids": [c["i"] for c in data["c"][:3]]})
    return json.dumps({"queries": [e["text"].split("\n", 1)[0] for e in data["e"][:2]]})


def test_evireform_builds_its_index_and_calls_the_llm(user_files: dict[str, Path]) -> None:
    set_responder(_scripted)
    result = _invoke(user_files, "--method", "evireform", "--variant", "full")
    assert result.exit_code == 0, result.output
    index = user_files["out"] / "artifacts" / "user" / "index"
    props = read_parquet(index / "propositions.parquet")
    assert len(props) >= len(USER_PASSAGES) and (props["extractor"] == "sentences").all()
    assert (index / "entities.parquet").exists() and (index / "incidence.parquet").exists()
    trace = read_parquet(user_files["out"] / "evireform-full-trace.parquet")
    assert len(trace) == 2 and int(trace["sel_prompt_tokens"].sum()) > 0  # the LLM steps ran
    assert "llm tokens:" in result.output
    calls, time_line = [line for line in result.output.splitlines() if line.startswith("LLM ")]
    assert calls == ("LLM calls to make (before retries and repair turns): index 0 (propositions: "
                     "sentence extractor, no LLM) + questions ≤ 4 (≤ 2 per question × 2: selection 1 "
                     "+ judge 0 + reformulation 1) = ≤ 4")
    assert time_line.startswith("LLM time: ~0s (4 calls × 0 s / llm.concurrency 1; 0 s: the scripted")
    run = read_parquet(user_files["out"] / "evireform-full.parquet")
    assert run.groupby("question_id").size().min() >= 1
    assert read_json(user_files["out"] / "evireform-full-metrics.json")["n_questions"] == 2


def test_index_like_builds_the_index_as_for_that_dataset(user_files: dict[str, Path]) -> None:
    """params.yaml asks for LLM extraction; --index-like musique builds the sentence propositions
    MuSiQue is indexed with (no responder is set: an LLM call would fail the run)."""
    params = yaml.safe_load(user_files["params"].read_text(encoding="utf-8"))
    params["evireform"]["index"] = {"extractor": "llm", "extractor_by_dataset": {"musique": "sentences"}}
    user_files["params"].write_text(yaml.safe_dump(params), encoding="utf-8")
    result = _invoke(user_files, "--method", "proprag", "--index-like", "musique")
    assert result.exit_code == 0, result.output
    assert "index settings as for musique: evireform.index.extractor sentences" in result.output
    props = read_parquet(user_files["out"] / "artifacts" / "user" / "index" / "propositions.parquet")
    assert (props["extractor"] == "sentences").all()
    assert "LLM calls to make" not in result.output  # nothing calls an LLM


def test_index_like_unknown_dataset_names_the_choices(user_files: dict[str, Path]) -> None:
    result = _invoke(user_files, "--method", "proprag", "--index-like", "musiqe")
    assert result.exit_code == 2
    assert ("error: --index-like 'musiqe' is not a dataset; choose one of: demo, 2wiki, musique"
            in result.output)
    assert not user_files["out"].exists()


def test_without_gold_writes_the_ranking_only(user_files: dict[str, Path]) -> None:
    result = _invoke(user_files, "--method", "bm25", gold=False)
    assert result.exit_code == 0, result.output
    assert "ranking only" in result.output
    assert not (user_files["out"] / "bm25-metrics.json").exists()
    assert isinstance(read_parquet(user_files["out"] / "bm25.parquet"), pd.DataFrame)


@pytest.mark.parametrize(("extra", "message"), [
    (["--method", "nope"], "nope"),
    (["--method", "evireform", "--variant", "nope"], "no variant 'nope'"),
])
def test_clear_errors(user_files: dict[str, Path], extra: list[str], message: str) -> None:
    result = _invoke(user_files, *extra)
    assert result.exit_code == 2 and message in result.output


def test_malformed_file_names_file_and_line(user_files: dict[str, Path]) -> None:
    with user_files["corpus"].open("a", encoding="utf-8") as fh:
        fh.write('{"id": "d7", "title": "X"}\n')
    result = _invoke(user_files, "--method", "dense")
    assert result.exit_code == 2
    assert "corpus.jsonl:7: field 'text' must be a non-empty string" in result.output


def test_methods_lists_the_registry() -> None:
    result = CliRunner().invoke(app, ["methods"])
    assert result.exit_code == 0
    names = {line.split()[0] for line in result.output.splitlines()}
    assert {"bm25", "dense", "evireform", "cee", "proprag", "hybrid"} <= names


# ---------------------------------------------------------------- failure is loud (issue 61)
def _llm_params(files: dict[str, Path], **llm: Any) -> None:
    """The fixture's params with ``llm`` settings and one HyDE sample per question."""
    params = yaml.safe_load(files["params"].read_text(encoding="utf-8"))
    params["llm"].update(max_retries=0, **llm)
    params["expansion"] = {"hyde": {"n_samples": 1}}
    files["params"].write_text(yaml.safe_dump(params), encoding="utf-8")


def _limit_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if "max_failure_rate" in line]


def test_unreachable_endpoint_exits_non_zero_without_metrics(
        user_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing listens on port 9: every request fails (connection refused), every question
    falls back to the question alone; the run and trace are kept, no metrics under the
    method's name."""
    monkeypatch.setenv("EVICHAIN_TEST_KEY", "sk-test")
    _llm_params(user_files, model="openai/x", api_base="http://127.0.0.1:9/v1", timeout_s=10,
                api_key_env="EVICHAIN_TEST_KEY")
    result = _invoke(user_files, "--method", "hyde")
    assert result.exit_code == 2, result.output
    trace_path = user_files["out"] / "hyde-trace.parquet"
    (line,) = _limit_lines(result.output)
    assert line == (f"error: 2 of 2 LLM requests failed (100.0% > llm.max_failure_rate 20.0%); "
                    f"see {trace_path}; no metrics written")
    assert "Traceback" not in result.output
    assert not (user_files["out"] / "hyde-metrics.json").exists()
    trace = read_parquet(trace_path)                                  # the failure rows are kept
    assert trace["status"].tolist() == ["failed", "failed"] and trace["fallback"].all()
    assert (user_files["out"] / "hyde.parquet").exists()


def test_unset_api_key_env_stops_before_any_work(user_files: dict[str, Path],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVICHAIN_TEST_UNSET_KEY", raising=False)
    _llm_params(user_files, model="openai/x", api_key_env="EVICHAIN_TEST_UNSET_KEY")
    result = CliRunner().invoke(app, [
        "run", "--method", "hyde", "--corpus", str(user_files["corpus"]),
        "--questions", str(user_files["questions"]), "--gold", str(user_files["gold"]),
        "--out", str(user_files["out"]), "--params", str(user_files["params"])])
    assert result.exit_code == 2
    assert result.output.splitlines() == [(
        "error: llm.api_key_env names the environment variable EVICHAIN_TEST_UNSET_KEY, which is "
        "not set: export EVICHAIN_TEST_UNSET_KEY=<your API key>, or set llm.api_key_env: null "
        "for an endpoint without a key")]
    assert not user_files["out"].exists()                               # nothing written


def test_unset_api_key_env_stops_the_llm_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stages' path: the client's construction raises a ParamsError (one line from
    ``run_stage``), not a failed call per question."""
    from evichain.config import ParamsError
    from evichain.llm import LLMClient
    from evichain.llm.params import LLMParams

    monkeypatch.delenv("EVICHAIN_TEST_UNSET_KEY", raising=False)
    with pytest.raises(ParamsError, match="EVICHAIN_TEST_UNSET_KEY, which is not set"):
        LLMClient(LLMParams(model="openai/x", api_key_env="EVICHAIN_TEST_UNSET_KEY"))


def test_failures_below_the_limit_are_counted_in_the_metrics(user_files: dict[str, Path]) -> None:
    """One of two questions' generation fails (an authentication error: not retried), under
    a limit of 60 %: the run passes and says what failed."""
    import litellm

    def respond(messages: list[dict[str, Any]], model: str) -> str:
        if "Lothair" in messages[-1]["content"]:
            raise litellm.AuthenticationError("401: bad key", llm_provider="scripted", model=model)
        return json.dumps({"passage": "Lake Geneva lies on the north side of the Alps."})

    set_responder(respond)
    _llm_params(user_files, model="scripted/user-run-failures", max_failure_rate=0.6)
    result = _invoke(user_files, "--method", "hyde")
    assert result.exit_code == 0, result.output
    metrics = read_json(user_files["out"] / "hyde-metrics.json")
    assert {k: metrics[k] for k in ("llm_requests", "llm_failed_requests", "questions",
                                    "failed_questions", "fallback_questions")} == {
        "llm_requests": 2, "llm_failed_requests": 1, "questions": 2, "failed_questions": 1,
        "fallback_questions": 1}
    assert metrics["n_questions"] == 2
    assert '"llm_failed_requests": 1' in result.output and "llm.max_failure_rate 60.0%" in result.output
