"""``evichain run --method fused`` (issue 61): the fused method runs on a user's own files like
any other method (real MiniLM embeddings, the scripted LLM), and its ranking is
:func:`score_fusion` of the rankings ``evichain run`` gives its components (ids exact, scores
within 1e-9); its trace and printed tokens count the components' LLM tokens."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pandas as pd
import pytest
import typer
import yaml
from typer.testing import CliRunner

from evichain.io import read_json, read_parquet
from evichain.llm.scripted import set_responder
from evichain.retrieval.fusion import score_fusion
from flows.cli import app, run
from tests.fixtures.lothair import USER_PASSAGES, write_jsonl, write_user_corpus
from tests.fixtures.scripted_llm import respond


@pytest.fixture()
def user_files(tmp_path: Path) -> dict[str, Path]:
    corpus = write_user_corpus(tmp_path / "corpus.jsonl")
    questions = write_jsonl(tmp_path / "questions.jsonl", [
        {"id": "q1", "question": "When did Lothair II's mother die?", "gold": ["d1", "d2"]},
        {"id": "q2", "question": "Which lake lies on the north side of the Alps?", "gold": ["d5"]},
    ])
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({
        "llm": {"model": "scripted/fused-cli", "backoff_base_s": 0.0},
        "evireform": {"index": {"extractor": "sentences"}},
        "fusion": {"runs": ["evireform-robust", "proprag"], "weights": [0.2, 0.8], "depth": 4},
        "orchestration": {"max_workers": 2},
    }), encoding="utf-8")
    return {"corpus": corpus, "questions": questions, "params": params, "dir": tmp_path}


def _run(files: dict[str, Path], method: str, variant: str | None, out: str) -> str:
    """``evichain run`` in-process (as tests/flows/test_user_run.py calls it); its output."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        try:
            run(method=method, variant=variant, corpus=files["corpus"], questions=files["questions"],
                gold=None, out=files["dir"] / out, params_file=files["params"])
        except typer.Exit as exc:
            raise AssertionError(f"exit {exc.exit_code}: {buffer.getvalue()}") from None
    return buffer.getvalue()


def _tokens(output: str) -> dict[str, int]:
    (line,) = [x for x in output.splitlines() if x.startswith("llm tokens:")]
    return json.loads(line.removeprefix("llm tokens:").split(" (")[0])


def test_fused_run_from_the_command_line_equals_fusion_of_the_components_runs(
        user_files: dict[str, Path]) -> None:
    set_responder(respond)
    output = _run(user_files, "fused", None, "fused")
    out = user_files["dir"] / "fused"
    got = read_parquet(out / "evireform-fused.parquet")
    assert (out / "evireform-fused.trec").exists()
    assert read_json(out / "evireform-fused-metrics.json")["n_questions"] == 2

    own = {"evireform-robust": _run(user_files, "evireform", "robust", "robust"),
           "proprag": _run(user_files, "proprag", None, "proprag")}
    runs = {name: read_parquet(user_files["dir"] / folder / f"{name}.parquet")
            for name, folder in (("evireform-robust", "robust"), ("proprag", "proprag"))}
    expected = score_fusion(runs, {"evireform-robust": 0.2, "proprag": 0.8}, 4)
    key = ["question_id", "rank", "passage_id"]
    assert got[key].values.tolist() == expected[key].values.tolist()
    assert got["score"].tolist() == pytest.approx(expected["score"].tolist(), abs=1e-9, rel=0)
    assert set(got["passage_id"]) <= {p[0] for p in USER_PASSAGES}             # the user's own ids

    trace = read_parquet(out / "evireform-fused-trace.parquet")
    robust = read_parquet(user_files["dir"] / "robust" / "evireform-robust-trace.parquet")
    spent = int(robust[[c for c in robust.columns if c.endswith("prompt_tokens")]].sum().sum())
    assert spent > 0 and int(trace["evireform-robust_prompt_tokens"].sum()) == spent
    assert "llm tokens:" not in own["proprag"]                            # PropRAG: LLM-free
    assert _tokens(output) == _tokens(own["evireform-robust"])
    assert isinstance(trace, pd.DataFrame) and set(trace["status"]) == {"ok"}


def test_unknown_variant_is_a_clear_error(user_files: dict[str, Path]) -> None:
    result = CliRunner().invoke(app, [
        "run", "--method", "fused", "--variant", "robust", "--corpus", str(user_files["corpus"]),
        "--questions", str(user_files["questions"]), "--out", str(user_files["dir"] / "x"),
        "--params", str(user_files["params"])])
    assert result.exit_code == 2
    assert "no variant 'robust'" in result.output and "evireform-fused" in result.output
