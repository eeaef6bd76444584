"""Flow of ``fuse@<dataset>`` (ours, issue 38): the fused run of several stored runs.

One task per run reads it (paths, not tables, go through Prefect); the runs are fused with
:func:`evichain.retrieval.fusion.score_fusion` and their traces' LLM tokens carried over
(:func:`~evichain.retrieval.fusion.fused_trace`); no model is called.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from evichain.io import read_table
from evichain.retrieval.fusion import fused_trace, score_fusion
from evichain.retrieval.params import FusionParams

if TYPE_CHECKING:
    import pandas as pd


@task(retries=1, retry_delay_seconds=2, cache_policy=NO_CACHE, task_run_name="read-run-{name}")
def read_run(path: Path, name: str, kind: str = "run") -> pl.DataFrame:
    """One method's run table (or, ``kind="trace"``, its trace of LLM tokens per question); a
    missing file is an error naming the stage that writes it, never an empty table (a missing
    trace would make the fused method look cheaper; an LLM-free run writes one without token
    columns)."""
    if not path.exists():
        raise FileNotFoundError(f"{kind} of {name!r} not found at {path}: reproduce that method's "
                                "retrieve stage first (fusion.runs)")
    return read_table(path)


@flow(name="fuse-runs", log_prints=True)
def fusion_flow(run_paths: dict[str, Path], fusion: FusionParams,
                trace_paths: dict[str, Path] | None = None) -> tuple[pd.DataFrame, pl.DataFrame]:
    """Σ_m w_m · max-scaled s_m over ``run_paths`` (name → run table), top ``fusion.depth``
    (a :func:`~evichain.retrieval.run.run_table`, the type ``stages/fuse.py`` counts questions
    of); and the per-question tokens of the runs of ``trace_paths`` (every trace must exist: a
    missing one would make the fused method look cheaper than it is)."""
    runs = {name: read_run(path, name) for name, path in run_paths.items()}
    fused = score_fusion(runs, fusion.weight_of(), fusion.depth)
    traces = {name: read_run(path, name, "trace") for name, path in (trace_paths or {}).items()}
    print(f"fused {sorted(runs)} with weights {fusion.weights}: "
          f"{fused['question_id'].nunique()} questions, {len(fused)} rows; "
          f"token traces of {sorted(traces)}")
    return fused, fused_trace(traces)
