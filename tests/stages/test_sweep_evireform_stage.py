"""Stage ``sweep_evireform@<dataset>``: its three outputs from the toy corpus (the 2Wiki rule:
statistics over the gold-reliable questions), and the datasets it refuses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from evichain.config import load_params
from evichain.io import read_parquet, write_parquet
from evichain.llm.scripted import set_responder
from stages.sweep_evireform import app, require_sweep_dataset, sweep_files
from tests.methods.evireform.test_evireform_retrieve import respond, write_toy_dataset

ROOT = Path(__file__).resolve().parents[2]

PARAMS = """\
evireform_datasets: [demo]
embed: {batch_size: 17}
llm: {model: scripted/sweep-stage, backoff_base_s: 0.0}
orchestration: {max_workers: 2}
evireform:
  top_k: 5
  sweep:
    datasets: [demo]
    alpha: [0.25, 0.5]
    beta: [0.5]
    k_r: [2]
    max_residual_queries: [1, 3]
    swept: [alpha, beta, k_r]
    metrics: [Recall@2, Chain@2]
    figure_metrics: [Recall@2, Chain@2]
"""


def _demo(tmp_path: Path) -> None:
    """The toy dataset as ``artifacts/demo`` (a 2Wiki slice: q2 is not gold-reliable)."""
    toy = write_toy_dataset(tmp_path)
    shutil.move(str(toy.dir), str(tmp_path / "artifacts" / "demo"))
    path = tmp_path / "artifacts" / "demo" / "questions.parquet"
    questions = read_parquet(path)
    questions["gold_reliable"] = [True, False]
    write_parquet(questions, path)


def test_stage_writes_table_json_and_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVICHAIN_EMBED_CACHE", str(tmp_path.parent / "sweep-embeddings.sqlite"))
    _demo(tmp_path)
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text(PARAMS)
    set_responder(respond)
    result = CliRunner().invoke(app, ["--dataset", "demo"])
    assert result.exit_code == 0, result.output
    table_path, json_path, figure_path = sweep_files("demo")
    assert figure_path.as_posix() == "reports/sweeps/demo/evireform.png"   # reports/figures is report's
    table = pl.read_parquet(table_path)
    assert table["config"].unique(maintain_order=True).to_list() == ["default", "alpha=0.25"]
    assert table.height == 4 and table["value"].null_count() == 2     # the default has no value
    summary = json.loads(json_path.read_text())
    assert summary["n_questions"] == 1 and summary["question_filter"] == "gold_reliable"
    assert summary["not_run"] == {"max_residual_queries": {"llm_calls_needed": 2, "values": [1]}}
    assert [c["config"] for c in summary["configs"]] == ["default", "alpha=0.25"]
    assert summary["configs"][1]["llm_usage"]["calls"] == 0
    assert set(summary["configs"][1]["scores"]) == {"Recall@2", "Chain@2"}
    assert figure_path.read_bytes()[:4] == b"\x89PNG"


def test_stage_refuses_datasets_outside_the_sweep() -> None:
    params = load_params(ROOT / "params.yaml")
    with pytest.raises(ValueError, match="evireform.sweep.datasets"):
        require_sweep_dataset(params, "2wiki_tune_s")
