"""DVC stage ``tune_cee@<dataset>``: the γ grid of CEE ``robust``'s bridge score inheritance
(ours, issue 38; ``cee.bridge_inherit``) on a dataset of ``tuning_datasets`` (a sample outside
every reported one).

Explores every question once with the ``robust`` variant (its LLM probes and summaries go
through the LLM client and its cache, so a recorded run replays with 0 model calls), ranks the
pools once per γ of ``cee.tuning.bridge_inherit`` and writes ``reports/tuning/<dataset>-cee.csv``
(one row per γ: the objective and every metric's mean) and ``reports/tuning/<dataset>-cee.json``
(the chosen γ, the objective, the question count, LLM usage). The chosen γ is copied into
``cee.bridge_inherit`` of ``params.yaml`` by hand; ``tests/test_cee_tuning.py`` checks that they
agree. Fails (after writing) above ``llm.max_failure_rate`` of failed LLM requests.
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import run_stage
from stages._tuning import finish_tuning, require_tuning_dataset

app = typer.Typer(add_completion=False)


@app.command()
def main(dataset: str = typer.Option(...),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.paths import DatasetPaths
        from flows.cee_tuning import run_tuning

        params = load_params(params_file)
        require_tuning_dataset(params, dataset)
        out = run_tuning(DatasetPaths(dataset), params.cee, params.llm, params.embed,
                         orch=params.orchestration)
        return finish_tuning(dataset, "cee", params, out.table, {"bridge_inherit": out.chosen},
                             out.summary)

    run_stage(f"tune_cee@{dataset}", body)


if __name__ == "__main__":
    app()
