"""Flow of ``fuse@<dataset>`` (ours, issue 38): the fused run of several stored runs.

One task reads the runs (paths, not tables, go through Prefect) and fuses them with
:func:`evichain.retrieval.fusion.score_fusion`; no model is called.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from evichain.io import read_parquet
from evichain.retrieval.fusion import score_fusion
from evichain.retrieval.params import FusionParams


@task(retries=1, retry_delay_seconds=2, cache_policy=NO_CACHE, task_run_name="read-run-{name}")
def read_run(path: Path, name: str) -> pd.DataFrame:
    """One method's run table; a missing file names the stage that writes it."""
    if not path.exists():
        raise FileNotFoundError(f"run of {name!r} not found at {path}: reproduce that method's "
                                "retrieve stage first (fusion.runs)")
    return read_parquet(path)


@flow(name="fuse-runs", log_prints=True)
def fusion_flow(run_paths: dict[str, Path], fusion: FusionParams) -> pd.DataFrame:
    """Σ_m w_m · max-scaled s_m over ``run_paths`` (name → run table), top ``fusion.depth``."""
    runs = {name: read_run(path, name) for name, path in run_paths.items()}
    fused = score_fusion(runs, fusion.weight_of(), fusion.depth)
    print(f"fused {sorted(runs)} with weights {fusion.weights}: "
          f"{fused['question_id'].nunique()} questions, {len(fused)} rows")
    return fused
