"""Reliability drill 2 at CI scale: kill -9 the extraction stage (a subprocess, its process
group) after a seeded random number of LLM calls; the re-run calls the model exactly for the
passages not finished before the kill and reproduces the uninterrupted run's outputs. Also: a
crash in the middle of an atomic write leaves no half-written output.
The larger run: ``python -m scripts.drills.crash_resume`` (and the report)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from scripts.drills import crash_resume


@pytest.fixture(scope="module")
def drill(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from prefect.settings import get_current_settings

    from scripts.drills.common import patched_env

    with patched_env({"PREFECT_API_URL": str(get_current_settings().api.url)}):
        return crash_resume.run(tmp_path_factory.mktemp("crash"), n_passages=24, shard=4,
                                latency_s=0.1, kills=1, seed=11, rerun_subprocess=False)


def test_killed_stage_leaves_no_output(drill: dict) -> None:
    kill = drill["kills"][0]
    assert kill["exit"] == -9 and kill["stage_outputs_present"] == []
    assert 0 < kill["cached_passages"] < drill["params"]["passages"]
    assert kill["checkpointed_passages"] <= kill["cached_passages"]


def test_rerun_calls_exactly_the_unfinished_passages(drill: dict) -> None:
    kill = drill["kills"][0]
    assert drill["rerun_exit"] == 0
    assert drill["rerun_calls"] == drill["rerun_calls_expected"] == 24 - kill["cached_passages"]
    # calls made twice = calls started before the kill whose result never reached the cache
    assert drill["calls_repeated"] == kill["calls_started_so_far"] - kill["cached_passages"] <= 2
    assert drill["invalid_cache_entries"] == 0 and drill["cache_integrity"] == "ok"


def test_resumed_outputs_equal_the_uninterrupted_run(drill: dict) -> None:
    assert drill["outputs_identical"]["propositions.parquet"]
    assert set(drill["status_differences"]) <= {"cached"}


def test_resumed_status_table_is_byte_identical(drill: dict) -> None:
    assert drill["outputs_identical"]["extraction_status.parquet"]


_CRASHING_WRITER = textwrap.dedent("""
    import os, sys
    import pandas as pd
    import pyarrow.parquet as pq
    from evichain import io

    real = pq.write_table
    def dying(table, where, **kw):           # write half a file, then die like kill -9
        real(table, where, **kw)
        with open(where, "r+b") as fh:
            fh.truncate(os.path.getsize(where) // 2)
        os._exit(137)
    pq.write_table = dying
    io.write_parquet(pd.DataFrame({"x": list(range(1000))}), sys.argv[1])
""")


def test_crash_mid_write_leaves_the_previous_output_intact(tmp_path: Path) -> None:
    from evichain.io import read_parquet, write_parquet

    target = tmp_path / "out" / "table.parquet"
    write_parquet(pd.DataFrame({"x": [1, 2, 3]}), target)
    before = target.read_bytes()
    proc = subprocess.run([sys.executable, "-c", _CRASHING_WRITER, str(target)],
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
                          capture_output=True, timeout=120)
    assert proc.returncode == 137
    assert target.read_bytes() == before                     # never replaced by half a file
    assert read_parquet(target)["x"].tolist() == [1, 2, 3]
    leftovers = [p.name for p in target.parent.iterdir() if p != target]
    assert all(name.startswith(".table.parquet.") and name.endswith(".tmp") for name in leftovers)


def test_exception_mid_write_removes_the_temporary_file(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.parquet as pq

    from evichain.io import write_parquet

    def failing(table, where, **kw):  # type: ignore[no-untyped-def]
        Path(where).write_bytes(b"PAR1 half")
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", failing)
    with pytest.raises(OSError, match="disk full"):
        write_parquet(pd.DataFrame({"x": [1]}), tmp_path / "t.parquet")
    assert list(tmp_path.iterdir()) == []
