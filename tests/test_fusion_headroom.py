"""scripts/fusion_headroom.py on hand-made per-question tables: the best-of oracle, the share of
its gap that the fused run captures, the per-question counts, the shared-question join and the
error that names a missing table."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("fusion_headroom", ROOT / "scripts" / "fusion_headroom.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _write(eval_dir: Path, method: str, ids: list[str], recall5: list[float]) -> None:
    (eval_dir / "ds").mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame({"question_id": ids, "Recall@5": recall5, "Chain@5": [float(r == 1) for r in recall5],
                          "Recall@10": recall5})
    frame.to_parquet(eval_dir / "ds" / f"{method}.parquet")


def test_headroom_counts_and_capture(tmp_path: Path, script) -> None:  # type: ignore[no-untyped-def]
    ids = ["q1", "q2", "q3", "q4"]
    _write(tmp_path, "a", ids, [1.0, 0.0, 0.5, 0.5])
    _write(tmp_path, "b", ids + ["q5"], [0.0, 1.0, 0.5, 0.5, 1.0])  # q5: only in b, dropped
    _write(tmp_path, "f", ids, [1.0, 0.5, 1.0, 0.0])
    table = script.headroom_table(tmp_path, "ds", ["a", "b"], "f").set_index("metric")
    row = table.loc["Recall@5"]
    assert row["n"] == 4
    assert row["a"] == 50.0 and row["b"] == 50.0 and row["f"] == 62.5
    assert row["best-of"] == 75.0                      # (1 + 1 + 0.5 + 0.5) / 4
    assert row["captured %"] == 50.0                   # (62.5 − 50) / (75 − 50)
    assert (row["< worse"], row["between"], row[">= better"], row["> better"]) == (1, 1, 2, 1)


def test_missing_table_names_the_method(tmp_path: Path, script) -> None:  # type: ignore[no-untyped-def]
    _write(tmp_path, "a", ["q1"], [1.0])
    with pytest.raises(SystemExit, match="b.parquet missing: evaluate b on ds"):
        script.headroom_table(tmp_path, "ds", ["a", "b"], "f")
