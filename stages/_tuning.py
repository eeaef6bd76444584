"""What the tuning stages (``tune_evireform``, ``tune_cee``) share: they run only on a dataset
of ``tuning_datasets`` (never on a reported sample) and write one family's grid and choice as
``reports/tuning/<dataset>-<family>.csv`` (one row per configuration) and ``.json`` (the
chosen values, the objective, the question count, LLM usage), and both fail (after writing)
above ``llm.max_failure_rate`` of failed LLM requests: values chosen over questions whose
answers failed would be chosen for the fallbacks, not the method.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np
import typer

from stages._common import check_failure_rate, run_stage

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl

    from evichain.config import Params
    from evichain.paths import DatasetPaths

TUNING_DIR = Path("reports/tuning")


class TuningResult(Protocol):
    """What a family's tuning flow returns: the grid (one row per configuration) and the
    summary (configurations, questions, LLM usage); the chosen values vary by family."""

    table: pl.DataFrame | pd.DataFrame
    summary: dict[str, Any]


_Result = TypeVar("_Result", bound=TuningResult)


def tuning_files(dataset: str, family: str) -> tuple[Path, Path]:
    """(csv, json) of ``family``'s tuning results on ``dataset``."""
    stem = TUNING_DIR / f"{dataset}-{family}"
    return stem.with_suffix(".csv"), stem.with_suffix(".json")


def require_tuning_dataset(params: Params, dataset: str) -> None:
    """Refuse to tune on a dataset outside ``tuning_datasets`` (a reported sample would leak)."""
    if dataset not in params.tuning_datasets:
        raise ValueError(f"{dataset!r} is not in tuning_datasets {params.tuning_datasets}: "
                         "tune only on samples outside the reported ones")


def tuning_csv(table: pl.DataFrame | pd.DataFrame) -> str:
    """The grid as CSV text (the format pandas' ``round(6).to_csv(index=False)`` wrote): a
    header line, one line per row, ``\\n`` line ends, minimal quoting; a float cell is
    ``repr(np.round(x, 6))`` (round half to even at 6 places), a null or NaN cell is empty,
    any other cell ``str(value)`` (bools ``True`` / ``False``)."""
    from evichain.metrics.frames import as_polars

    frame = as_polars(table)
    columns = []
    for name, dtype in frame.schema.items():
        if dtype.is_float():
            values = np.round(frame[name].cast(float).to_numpy(), 6)  # a null reads as NaN
            columns.append(["" if np.isnan(v) else repr(float(v)) for v in values])
        else:
            columns.append(["" if v is None else str(v) for v in frame[name].to_list()])
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(frame.columns)
    writer.writerows(zip(*columns))
    return out.getvalue()


def write_tuning(dataset: str, family: str, table: pl.DataFrame | pd.DataFrame,
                 chosen: dict[str, Any], summary: dict[str, Any]) -> tuple[Path, Path]:
    """Write the grid (:func:`tuning_csv`) and ``{dataset, chosen, **summary}``."""
    from evichain.io import write_json, write_text

    csv_path, json_path = tuning_files(dataset, family)
    write_text(tuning_csv(table), csv_path)  # atomic
    write_json({"dataset": dataset, "chosen": chosen, **summary}, json_path)
    return csv_path, json_path


def finish_tuning(dataset: str, family: str, params: Params, table: pl.DataFrame | pd.DataFrame,
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



def tune_and_finish(family: str, dataset: str, params_file: Path,
                    tune: Callable[[DatasetPaths, Params], _Result],
                    chosen: Callable[[_Result], dict[str, Any]]) -> dict[str, Any]:
    """The body of stage ``tune_<family>@<dataset>``: load ``params_file``, refuse a dataset
    outside ``tuning_datasets`` (:func:`require_tuning_dataset`), ``tune`` the family on the
    dataset, then write the grid and ``chosen(result)`` and fail above
    ``llm.max_failure_rate`` (:func:`finish_tuning`); returns the stage's one-line summary."""
    from evichain.config import load_params
    from evichain.paths import DatasetPaths

    params = load_params(params_file)
    require_tuning_dataset(params, dataset)
    out = tune(DatasetPaths(dataset), params)
    return finish_tuning(dataset, family, params, out.table, chosen(out), out.summary)


def tuning_app(family: str, tune: Callable[[DatasetPaths, Params], _Result],
               chosen: Callable[[_Result], dict[str, Any]]) -> typer.Typer:
    """The command line of stage ``tune_<family>@<dataset>`` (``--dataset``, ``--params``):
    :func:`tune_and_finish` run by :func:`stages._common.run_stage` (clean error exits, the
    summary line). ``tune`` imports its flow when called, so ``--help`` loads no flow."""
    app = typer.Typer(add_completion=False)

    @app.command()
    def main(dataset: str = typer.Option(...),
             params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
        run_stage(f"tune_{family}@{dataset}",
                  lambda: tune_and_finish(family, dataset, params_file, tune, chosen))

    return app
