"""The one conversion at the pandas boundary of the metrics and report code.

The library computes with polars (the design card's table library). Callers not yet migrated
(flows, stages, tuning loops) still hand in pandas DataFrames; :func:`as_polars` converts those
once, at entry, and passes polars frames through unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    import pandas as pd

def as_polars(frame: pl.DataFrame | pd.DataFrame) -> pl.DataFrame:
    """``frame`` as a polars DataFrame: polars unchanged; pandas via ``pl.from_pandas`` (index
    dropped, NaN of float columns read as null)."""
    if isinstance(frame, pl.DataFrame):
        return frame
    return pl.from_pandas(frame)


def mean(column: pl.Series) -> float:
    """Mean of the non-null, non-NaN values, summed by numpy (pairwise summation, as pandas
    does), so that a mean moved from pandas to polars keeps the same float bits."""
    import numpy as np

    values = column.cast(pl.Float64).to_numpy()
    return float(np.nanmean(values)) if len(values) else float("nan")


def columns_as_polars(frame: pl.DataFrame | pd.DataFrame, columns: Sequence[str]) -> pl.DataFrame:
    """The columns of ``columns`` that ``frame`` has, in that order, as polars; a pandas frame is
    cut to them before :func:`as_polars`, so columns not needed (lists of records, mixed
    objects) are never converted."""
    present = [c for c in columns if c in frame.columns]
    if isinstance(frame, pl.DataFrame):
        return frame.select(present)
    return as_polars(frame[present])
