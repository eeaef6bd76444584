"""DVC stage ``tune_evireform@<dataset>``: grid search of the ``robust`` and ``hybrid`` variants
(ours, issue 38) on a dataset of ``tuning_datasets`` (a sample outside every reported one).

Reads that dataset's index and questions; the LLM answers are ``full``'s (same prompts), so the
stage depends on ``full``'s trace and replays them from the LLM cache. Writes
``reports/tuning/<dataset>-evireform.csv`` (one row per configuration: its values, the
objective and every metric's mean) and ``reports/tuning/<dataset>-evireform.json`` (the
chosen values, the objective, the question count). The chosen values are copied into
``evireform.robust`` of ``params.yaml`` by hand, and ``tests/test_tuning_recorded.py`` checks
that they agree, so a report never runs with values the tuning did not choose. Fails (after
writing) above ``llm.max_failure_rate`` of failed LLM requests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stages._tuning import tuning_app

if TYPE_CHECKING:
    from evichain.config import Params
    from evichain.paths import DatasetPaths
    from flows.evireform import TuningOutput


def _tune(paths: DatasetPaths, params: Params) -> TuningOutput:
    """The ``robust`` and ``hybrid`` grids of ``evireform.tuning`` on ``paths``' dataset
    (:func:`flows.evireform.run_tuning`)."""
    from flows.evireform import run_tuning

    return run_tuning(paths, params)


app = tuning_app("evireform", _tune, lambda out: out.chosen)

if __name__ == "__main__":
    app()
