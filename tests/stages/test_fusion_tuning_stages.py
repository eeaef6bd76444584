"""The fusion tuning stages ``tune_fusion`` and ``tune_seed_fusion`` (ours, issue 38): their
records on small fixture runs, the committed records re-written byte for byte by the library,
and their place in ``dvc.yaml`` (``fuse_seeds`` depends on the seed record as an output).

The real inputs (EviReform robust's run on ``2wiki_tune_s``, CEE robust and PropRAG computed
there) are DVC artifacts; the committed records were made from them by the scripts these stages
replace, whose JSON the stages write byte-identically from the same runs.
"""

from __future__ import annotations

import json
import shutil
import types
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from evichain.io import write_json, write_parquet
from evichain.paths import DatasetPaths
from evichain.retrieval import fusion_tuning as ft
from evichain.retrieval.run import run_table
from stages.code_digest import digest_path, listed_files

ROOT = Path(__file__).resolve().parents[2]
TUNING = ROOT / "reports" / "tuning"
DATASET = "2wiki_tune_s"


def _questions(n: int = 12) -> pd.DataFrame:
    return pd.DataFrame({"question_id": [f"q{i}" for i in range(n)], "question": ["?"] * n,
                         "answer": ["a"] * n,
                         "gold_passage_ids": [[f"p{i}", f"p{i + 1}"] for i in range(n)],
                         "gold_reliable": [True] * n})


def _run(seed: int, n: int = 12, depth: int = 8) -> pd.DataFrame:
    """A run with some gold passages near the top and score units that differ per run."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        pids = list(dict.fromkeys([f"p{(i + int(k)) % (n + 4)}" for k in rng.permutation(n + 4)]))
        scores = np.sort(rng.random(depth))[::-1] * (10.0 ** seed)
        rows += [(f"q{i}", r + 1, pid, float(s)) for r, (pid, s) in enumerate(zip(pids, scores))]
    return run_table(rows)


@pytest.fixture()
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DatasetPaths:
    """A working directory with params.yaml and the tuning sample's questions and stored runs."""
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    paths = DatasetPaths(DATASET)
    paths.run("x").parent.mkdir(parents=True)
    write_parquet(_questions(), paths.questions)
    write_parquet(_run(0), paths.run("evireform-robust"))
    write_parquet(_run(1), paths.run("cee-robust"))
    return paths


def test_seed_stage_writes_the_record_fuse_seeds_reads(work: DatasetPaths) -> None:
    from stages.fuse import record_fusion
    from stages.tune_seed_fusion import app

    result = CliRunner().invoke(app, ["--dataset", DATASET])
    assert result.exit_code == 0, result.output
    rec = json.loads((Path("reports/tuning") / f"{DATASET}-seed_fusion.json").read_text())
    table = ft.grid(_run(0), _run(1), _questions(), 20, labels=ft.SEED_LABELS)
    w = ft.choose(table, ft.SEED_LABELS[0])
    assert rec == json.loads(json.dumps(ft.seed_record(DATASET, 12, table, w, ft.SEED_RUNS, 20, 1.0)))
    assert rec["rows"][0][ft.SEED_LABELS[0]] == 0.0 and rec["grid"] == list(ft.GRID)
    fusion = record_fusion(Path("reports/tuning") / f"{DATASET}-seed_fusion.json", taken="x")
    assert fusion.runs == list(ft.SEED_RUNS) and fusion.weights[0] == w
    md = (Path("reports/tuning") / f"{DATASET}-seed_fusion.md").read_text()
    assert f"**w = {w}**" in md and "Exploration" not in md
    assert f"`EVICHAIN_LLM_REPLAY=1 python -m stages.tune_seed_fusion --dataset {DATASET}`" in md


def test_seed_stage_explores_stored_extra_runs_and_refuses_reported_samples(
        work: DatasetPaths) -> None:
    from stages.tune_seed_fusion import app

    write_parquet(_run(2), work.run("proprag"))  # stored: read, not computed
    result = CliRunner().invoke(app, ["--dataset", DATASET, "--explore", "proprag"])
    assert result.exit_code == 0, result.output
    md = (Path("reports/tuning") / f"{DATASET}-seed_fusion.md").read_text()
    assert "## Exploration (for reading only): with proprag, the 10 best weightings" in md
    assert "w evireform-robust" in md and "w proprag" in md
    refused = CliRunner().invoke(app, ["--dataset", "2wiki_s"])
    assert refused.exit_code == 2 and "tuning_datasets" in refused.output
    missing = CliRunner().invoke(app, ["--dataset", DATASET, "--explore", "bm25"])
    assert missing.exit_code == 2 and "'bm25' is not computed here" in missing.output


def test_fusion_stage_runs_proprag_and_records_the_params_weights(
        work: DatasetPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    import flows.method
    from stages.tune_fusion import app

    calls = []

    def fake_run_method(paths, method, variant, params, stage):  # type: ignore[no-untyped-def]
        calls.append((paths.dataset, method, stage))
        return types.SimpleNamespace(run=_run(2), summary={})

    monkeypatch.setattr(flows.method, "run_method", fake_run_method)
    result = CliRunner().invoke(app, ["--dataset", DATASET])
    assert result.exit_code == 0, result.output
    assert calls == [(DATASET, "proprag", "tune_fusion")]
    rec = json.loads((Path("reports/tuning") / f"{DATASET}-fusion.json").read_text())
    table = ft.grid(_run(0), _run(2), _questions(), 20)
    w = ft.choose(table)
    assert rec == json.loads(json.dumps(ft.fusion_record(DATASET, 12, table, w, [0.2, 0.8])))
    assert rec["rows"][-1]["w (robust)"] == 1.0
    md = (Path("reports/tuning") / f"{DATASET}-fusion.md").read_text()
    assert md.startswith(f"# evireform-fused weights: {DATASET} (12 questions, tuning only)\n")


def _rows_table(rec: dict, labels: tuple[str, str]) -> pl.DataFrame:
    """The record's rows with the grid's column order (the record's keys are sorted)."""
    return pl.DataFrame(rec["rows"]).select(*labels, *ft.METRICS)


def test_committed_records_are_what_the_library_writes(tmp_path: Path) -> None:
    """From their own rows and fields, the library re-writes both committed records byte for
    byte, and the committed tables for reading start as it renders them."""
    seed_path, fusion_path = TUNING / f"{DATASET}-seed_fusion.json", TUNING / f"{DATASET}-fusion.json"
    rec = json.loads(seed_path.read_text())
    table = _rows_table(rec, ft.SEED_LABELS)
    out = write_json(ft.seed_record(rec["dataset"], rec["n_questions"], table,
                                    ft.choose(table, ft.SEED_LABELS[0]), rec["runs"], rec["depth"],
                                    rec["bridge_inherit"]), tmp_path / "seed.json")
    assert out.read_bytes() == seed_path.read_bytes()
    command = f"EVICHAIN_LLM_REPLAY=1 python -m stages.tune_seed_fusion --dataset {DATASET} --explore proprag"
    md = ft.seed_markdown(rec["dataset"], rec["n_questions"], table, rec["chosen_w"], rec["runs"],
                          rec["depth"], rec["bridge_inherit"], command)
    assert seed_path.with_suffix(".md").read_text().startswith(md)

    rec = json.loads(fusion_path.read_text())
    table = _rows_table(rec, ft.FUSED_LABELS)
    out = write_json(ft.fusion_record(rec["dataset"], rec["n_questions"], table, ft.choose(table),
                                      rec["params_weights"]), tmp_path / "fusion.json")
    assert out.read_bytes() == fusion_path.read_bytes()
    committed = fusion_path.with_suffix(".md").read_text()
    head, grid_md = committed.split("\n\n|", 1)
    assert f"`python -m stages.tune_fusion --dataset {DATASET}`" in head
    assert "|" + grid_md == ft.markdown_table(table) + "\n"


def test_dvc_tuning_stages_write_what_their_readers_read() -> None:
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    seed, fusion = stages["tune_seed_fusion"], stages["tune_fusion"]
    assert seed["cmd"].startswith("python -m stages.tune_seed_fusion --dataset ${item.dataset}")
    assert fusion["cmd"] == "python -m stages.tune_fusion --dataset ${item.dataset}"
    outs = [next(iter(o)) for o in seed["outs"]]
    assert outs == ["reports/tuning/${item.dataset}-seed_fusion.json",
                    "reports/tuning/${item.dataset}-seed_fusion.md"]
    assert all(next(iter(o.values()))["cache"] is False for o in seed["outs"] + fusion["outs"])
    assert [next(iter(o)) for o in fusion["outs"]] == ["reports/tuning/${item.dataset}-fusion.json",
                                                       "reports/tuning/${item.dataset}-fusion.md"]
    for name, module in (("tune_seed_fusion", "stages/tune_seed_fusion.py"), ("tune_fusion", "stages/tune_fusion.py")):
        stage, code = stages[name], listed_files(name, stages)
        assert str(digest_path(name)) in stage["deps"]
        assert module in code and "evichain/retrieval/fusion_tuning.py" in code
        assert "artifacts/${item.dataset}/runs/evireform-robust.parquet" in stage["deps"]
    fuse_seeds = stages["fuse_seeds"]["do"]
    record = "reports/tuning/2wiki_tune_s-seed_fusion.json"
    assert record in fuse_seeds["deps"] and f"--record {record}" in fuse_seeds["cmd"]
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert record == outs[0].replace("${item.dataset}", params["tuning_datasets"][0])
