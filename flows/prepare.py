"""Dataset conversion flow (one task: the conversion is fast and must be atomic)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from evichain.config import DataParams
from evichain.data.prepare import prepare_dataset


@task(name="convert-dataset", task_run_name="convert-{dataset}", cache_policy=NO_CACHE)
def convert(dataset: str, source_dir: Path, data: DataParams) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Verify the source checksums and convert ``dataset`` to the corpus/questions tables."""
    return prepare_dataset(dataset, source_dir, data)


@flow(name="prepare", log_prints=True)
def prepare_flow(dataset: str, source_dir: Path, data: DataParams) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Convert one dataset; the stage writes the two Parquet tables."""
    return convert(dataset, source_dir, data)
