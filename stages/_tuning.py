"""What the tuning stages (``tune_evireform``, ``tune_cee``) share: they run only on a dataset
of ``tuning_datasets`` (never on a reported sample) and write one family's grid and choice as
``reports/tuning/<dataset>-<family>.csv`` (one row per configuration) and ``.json`` (the
chosen values, the objective, the question count, LLM usage), and both fail (after writing)
above ``llm.max_failure_rate`` of failed LLM requests: values chosen over questions whose
answers failed would be chosen for the fallbacks, not the method.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from stages._common import check_failure_rate

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


def finish_tuning(dataset: str, family: str, params: Params, table: pd.DataFrame,
                  chosen: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    """Write the results (:func:`write_tuning`), then fail above ``llm.max_failure_rate`` of
    failed requests in ``summary["llm_usage"]``; return the stage's one-line summary.
    """
    _, json_path = write_tuning(dataset, family, table, chosen, summary)
    usage = summary["llm_usage"]
    check_failure_rate(int(usage.get("failures", 0)), int(usage.get("requests", 0)),
                       params.llm.max_failure_rate, key="llm.max_failure_rate",
                       what="LLM requests", see=json_path)
    return {"dataset": dataset, "chosen": chosen, "configurations": summary["configurations"],
            "llm_calls": usage.get("calls", 0)}
