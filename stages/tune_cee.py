"""DVC stage ``tune_cee@<dataset>``: the γ grid of CEE ``robust``'s bridge score inheritance
(ours, issue 38; ``cee.bridge_inherit``) on a dataset of ``tuning_datasets`` (a sample outside
every reported one).

Explores every question once with the ``robust`` variant (its LLM probes and summaries go
through the LLM client and its cache, so a recorded run replays with 0 model calls), ranks the
pools once per γ of ``cee.tuning.bridge_inherit`` and writes ``reports/tuning/<dataset>-cee.csv``
(one row per γ: the objective and every metric's mean) and ``reports/tuning/<dataset>-cee.json``
(the chosen γ, the objective, the question count, LLM usage). The chosen γ is copied into
``cee.bridge_inherit`` of ``params.yaml`` by hand; ``tests/methods/cee/test_cee_tuning.py`` checks that they
agree. Fails (after writing) above ``llm.max_failure_rate`` of failed LLM requests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stages._tuning import tuning_app

if TYPE_CHECKING:
    from evichain.config import Params
    from evichain.paths import DatasetPaths
    from flows.cee_tuning import TuningOutput


def _tune(paths: DatasetPaths, params: Params) -> TuningOutput:
    """``robust``'s γ grid of ``cee.tuning.bridge_inherit`` on ``paths``' dataset
    (:func:`flows.cee_tuning.run_tuning`)."""
    from flows.cee_tuning import run_tuning

    return run_tuning(paths, params)


app = tuning_app("cee", _tune, lambda out: {"bridge_inherit": out.chosen})

if __name__ == "__main__":
    app()
