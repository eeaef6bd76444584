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

PASSAGES = [
    ("d1", "Lothair II", "Lothair II was the son of Emperor Lothair I and Ermengarde of Tours."),
    ("d2", "Ermengarde of Tours", "Ermengarde of Tours died on 20 March 851 in the abbey of Erstein."),
    ("d3", "Lothair I", "Lothair I was emperor of the Franks from 817 to 855."),
    ("d4", "Erstein", "Erstein is a commune in the Bas-Rhin department in Alsace."),
    ("d5", "Lake Geneva", "Lake Geneva is a deep lake on the north side of the Alps."),
    ("d6", "Tours", "Tours is a city on the Loire in central France."),
]


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture()
def user_files(tmp_path: Path) -> dict[str, Path]:
    corpus = _jsonl(tmp_path / "corpus.jsonl",
                    [{"id": i, "title": t, "text": x} for i, t, x in PASSAGES])
    questions = _jsonl(tmp_path / "questions.jsonl", [
        {"id": "q1", "question": "When did Lothair II's mother die?", "answers": ["20 March 851"]},
        {"id": "q2", "question": "Which lake lies on the north side of the Alps?"},
    ])
    gold = _jsonl(tmp_path / "gold.jsonl", [
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
                              "params_file": files["params"]}
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
    assert set(run["passage_id"]) <= {p[0] for p in PASSAGES}          # the user's own ids
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
    assert len(props) >= len(PASSAGES) and (props["extractor"] == "sentences").all()
    assert (index / "entities.parquet").exists() and (index / "incidence.parquet").exists()
    trace = read_parquet(user_files["out"] / "evireform-full-trace.parquet")
    assert len(trace) == 2 and int(trace["sel_prompt_tokens"].sum()) > 0  # the LLM steps ran
    assert "llm tokens:" in result.output
    run = read_parquet(user_files["out"] / "evireform-full.parquet")
    assert run.groupby("question_id").size().min() >= 1
    assert read_json(user_files["out"] / "evireform-full-metrics.json")["n_questions"] == 2


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
