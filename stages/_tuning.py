"""What the tuning stages (``tune_evireform``, ``tune_cee``) share: they run only on a dataset
of ``tuning_datasets`` (never on a reported sample) and write one family's grid and choice as
``reports/tuning/<dataset>-<family>.csv`` (one row per configuration) and ``.json`` (the
chosen values, the objective, the question count, LLM usage).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from evichain.config import Params

TUNING_DIR = Path("reports/tuning")


def tuning_files(dataset: str, family: str) -> tuple[Path, Path]:
    """(csv, json) of ``family``'s tuning results on ``dataset``."""
    stem = TUNING_DIR / f"{dataset}-{family}"
    return stem.with_suffix(".csv"), stem.with_suffix(".json")


def require_tuning_dataset(params: Params, dataset: str) -> None:
    """Refuse to tune on a dataset outside ``tuning_datasets`` (a reported sample would leak)."""
    if dataset not in params.tuning_datasets:
        raise ValueError(f"{dataset!r} is not in tuning_datasets {params.tuning_datasets}: "
                         "tune only on samples outside the reported ones")


def write_tuning(dataset: str, family: str, table: pd.DataFrame, chosen: dict[str, Any],
                 summary: dict[str, Any]) -> tuple[Path, Path]:
    """Write the grid (values rounded to 6 places) and ``{dataset, chosen, **summary}``."""
    from evichain.io import write_json

    csv_path, json_path = tuning_files(dataset, family)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    table.round(6).to_csv(csv_path, index=False)
    write_json({"dataset": dataset, "chosen": chosen, **summary}, json_path)
    return csv_path, json_path
