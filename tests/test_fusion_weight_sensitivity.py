"""scripts/fusion_weight_sensitivity.py on hand-made runs: the sweep's ends are the two runs
alone, a middle weight mixes them, the differences are against PropRAG, the tuned row is marked
and a missing run names the stage that makes it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

from evichain.retrieval.run import run_table

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def script():  # type: ignore[no-untyped-def]
    path = ROOT / "scripts" / "fusion_weight_sensitivity.py"
    spec = importlib.util.spec_from_file_location("fusion_weight_sensitivity", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _questions() -> pd.DataFrame:
    return pd.DataFrame({"question_id": ["q1", "q2"],
                         "gold_passage_ids": [["g1", "g2"], ["h1", "h2"]]})


def _fillers(q: str, n: int) -> list[tuple[str, int, str, float]]:
    return [(q, 10 + i, f"{q}-x{i}", 0.001) for i in range(n)]


def test_sweep_ends_are_the_runs_and_the_middle_mixes(script) -> None:  # type: ignore[no-untyped-def]
    # robust finds g1 and h1 only; PropRAG finds g2 and h2 only; each at rank 1, fillers below.
    robust = run_table([("q1", 1, "g1", 1.0), ("q2", 1, "h1", 1.0), *_fillers("q1", 6), *_fillers("q2", 6)])
    proprag = run_table([("q1", 1, "g2", 0.5), ("q2", 1, "h2", 0.5), *_fillers("q1", 6), *_fillers("q2", 6)])
    table = script.sweep(robust, proprag, _questions(), "ds", depth=20, n_resamples=200).set_index("w (robust)")
    assert table.loc[0.0, "Recall@5"] == 50.0 and table.loc[1.0, "Recall@5"] == 50.0
    assert table.loc[0.5, "Recall@5"] == 100.0 and table.loc[0.5, "Chain@5"] == 100.0
    assert table.loc[0.0, "Recall@5 − PropRAG [95% CI]"].startswith("+0.00")
    assert table.loc[0.5, "Recall@5 − PropRAG [95% CI]"].startswith("+50.00")
    assert "**0.5** (tuned)" in script.render("ds", table.reset_index(), 0.5)
    assert "_Recall@5_low" not in script.render("ds", table.reset_index(), 0.5)


def test_missing_run_names_the_stage(tmp_path: Path, monkeypatch, script) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match="retrieve_evireform@ds-robust"):
        script.stored_runs("ds")
