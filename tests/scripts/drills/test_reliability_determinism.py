"""Determinism (reliability drill 6): the same params and cache give byte-identical stage
outputs across runs, so that DVC does not re-run downstream stages after an unchanged stage
re-runs. Each stage runs twice through its real entry point, its outputs deleted in between
(as DVC deletes a stage's outputs before running it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from scripts.drills import bad_input
from scripts.drills import common as c


def _outputs(work: Path) -> dict[str, bytes]:
    files = [p for root in ("artifacts", "reports") for p in sorted((work / root).rglob("*"))
             if p.is_file()]
    return {str(p.relative_to(work)): p.read_bytes() for p in files}


def _clear(work: Path) -> None:
    for root in ("artifacts", "reports"):
        shutil.rmtree(work / root, ignore_errors=True)


def test_prepare_bm25_evaluate_are_byte_identical_across_runs(tmp_path: Path) -> None:
    bad_input.write_source(tmp_path)
    c.write_params(tmp_path, datasets=["2wiki"], data={"source_dir": "data"})
    env = c.drill_env(tmp_path, tmp_path / "calls.log", cache=tmp_path / "llm.sqlite",
                      checkpoints=tmp_path / "ckpt")
    runs = []
    for _ in range(2):
        _clear(tmp_path)
        for stage, args in (("prepare", []), ("retrieve", ["--method", "bm25"]),
                            ("evaluate", ["--method", "bm25"])):
            result = c.run_inprocess(stage, ["--dataset", "2wiki", *args], tmp_path, env)
            assert result.exit_code == 0, result.output
        runs.append(_outputs(tmp_path))
    assert set(runs[0]) == {"artifacts/2wiki/corpus.parquet", "artifacts/2wiki/questions.parquet",
                            "artifacts/2wiki/runs/bm25.parquet", "reports/eval/2wiki/bm25.parquet",
                            "reports/metrics/2wiki/bm25.json"}
    assert runs[0] == runs[1]


@pytest.fixture(scope="module")
def llm_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, bytes]]:
    """Extraction and QA reading with the scripted LLM: a cold run, a re-run (warm cache and
    shard checkpoints), and a re-run whose checkpoints were lost (cache only)."""
    work = tmp_path_factory.mktemp("determinism")
    corpus, questions = c.demo_slice(4, 12)
    env = c.drill_env(work, work / "calls.log", cache=work / "llm.sqlite",
                      checkpoints=work / "ckpt")
    c.write_params(work, evireform={"index": {"checkpoint_shard": 4}})
    c.write_dataset(work, "demo", corpus, questions)
    assert c.run_inprocess("retrieve", ["--dataset", "demo", "--method", "bm25"], work,
                           env).exit_code == 0
    out = {}
    for label in ("cold", "warm", "cache_only"):
        for sub in ("index", "qa", "usage"):                    # what DVC deletes first
            shutil.rmtree(work / "artifacts" / "demo" / sub, ignore_errors=True)
        if label == "cache_only":
            shutil.rmtree(work / "ckpt")
        for stage, args in (("extract", []), ("read", ["--method", "bm25"])):
            result = c.run_inprocess(stage, ["--dataset", "demo", *args], work, env)
            assert result.exit_code == 0, result.output
        out[label] = {k: v for k, v in _outputs(work).items() if k.endswith(".parquet")}
    return out


def test_extraction_rerun_is_byte_identical(llm_runs: dict[str, dict[str, bytes]]) -> None:
    for name in ("propositions.parquet", "extraction_status.parquet"):
        key = f"artifacts/demo/index/{name}"
        assert llm_runs["cold"][key] == llm_runs["warm"][key], name
    key = "artifacts/demo/index/propositions.parquet"
    assert llm_runs["cold"][key] == llm_runs["cache_only"][key]


def test_extraction_from_the_cache_alone_is_byte_identical(
        llm_runs: dict[str, dict[str, bytes]]) -> None:
    key = "artifacts/demo/index/extraction_status.parquet"
    assert llm_runs["cold"][key] == llm_runs["cache_only"][key]


def test_read_rerun_with_a_warm_cache_is_byte_identical(
        llm_runs: dict[str, dict[str, bytes]]) -> None:
    key = "artifacts/demo/qa/bm25.parquet"
    assert llm_runs["cold"][key] == llm_runs["warm"][key]


def test_every_llm_run_wrote_the_same_tables(llm_runs: dict[str, dict[str, bytes]]) -> None:
    names = {"artifacts/demo/index/propositions.parquet",
             "artifacts/demo/index/extraction_status.parquet", "artifacts/demo/qa/bm25.parquet"}
    assert all(names <= set(run) for run in llm_runs.values())
