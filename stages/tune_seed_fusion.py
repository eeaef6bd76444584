"""DVC stage ``tune_seed_fusion@<dataset>``: the weight w of ``seeds-fused`` (ours, issue 38) =
EviReform ``robust`` (w) ⊕ CEE ``robust`` (1 − w), on a dataset of ``tuning_datasets`` only.

Issue 38 asks for a combination of EviReform and CEE (neither paper combines them). Their
``robust`` variants rank from different evidence: EviReform's LLM-selected propositions and
residual queries propagated through shared entities, CEE's evidence-conditioned probes over a
bridge-expanded pool. The grid, the rule (max R@5 + Chain@5; ties: the middle of the tied w,
rounded to 0.1) and the record are :mod:`evichain.retrieval.fusion_tuning`'s; the depth is
``fusion.depth``.

Runs: a run stored at ``artifacts/<dataset>/runs/<name>.parquet`` is read (EviReform robust:
``retrieve_evireform@<dataset>-robust``); ``cee-robust`` is computed here with ``params.yaml``'s
CEE robust settings (its LLM answers are ``tune_cee``'s, recorded in
``reproduce/2wiki_tune_s-cee-llm-cache.sqlite``, so ``EVICHAIN_LLM_REPLAY=1`` replays it with 0
model calls) and ``proprag`` with ``retrieve_graph``'s code (LLM-free). ``--explore proprag``
adds a table of every weighting of the two runs and the extra ones on a 0.1 simplex (for
reading only; no choice is made from it).

Writes ``reports/tuning/<dataset>-seed_fusion.json`` (runs, depth, chosen w, CEE's γ, grid
rows), the params file the ``fuse_seeds`` stage fuses by, and
``reports/tuning/<dataset>-seed_fusion.md`` (the same grid and the exploration, for reading).
Fails (after writing) above ``llm.max_failure_rate`` of failed LLM requests of CEE robust.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from stages._common import check_failure_rate, run_stage
from stages._tuning import TUNING_DIR, require_tuning_dataset

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl

    from evichain.config import Params
    from evichain.paths import DatasetPaths

app = typer.Typer(add_completion=False)


def load_run(params: Params, paths: DatasetPaths, name: str,
             usage: dict[str, Any]) -> pl.DataFrame | pd.DataFrame:
    """The stored run (polars), or ``cee-robust`` / ``proprag`` computed here (the methods' run
    table, pandas; module docstring); the LLM usage of a computed run goes into
    ``usage[name]``."""
    from evichain.io import read_table

    if paths.run(name).exists():
        return read_table(paths.run(name))
    from flows.method import run_method

    if name == "cee-robust":
        out = run_method(paths, "cee", "robust", params, stage="tune_seed_fusion")
        usage[name] = dict(out.summary.get("llm_usage", {}))
        return out.run
    if name == "proprag":
        return run_method(paths, "proprag", None, params, stage="tune_seed_fusion").run
    raise FileNotFoundError(f"{paths.run(name)} missing and {name!r} is not computed here")


@app.command()
def main(dataset: str = typer.Option(...),
         explore: list[str] = typer.Option([], help="extra runs for the simplex table (reading only)"),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.io import read_table, write_json, write_text
        from evichain.paths import DatasetPaths
        from evichain.retrieval import fusion_tuning as ft

        params = load_params(params_file)
        require_tuning_dataset(params, dataset)
        paths = DatasetPaths(dataset)
        questions = read_table(paths.questions)
        depth, gamma, names = params.fusion.depth, params.cee.bridge_inherit, list(ft.SEED_RUNS)
        usage: dict[str, Any] = {}
        runs = {name: load_run(params, paths, name, usage) for name in [*names, *explore]}
        table = ft.grid(runs[names[0]], runs[names[1]], questions, depth, labels=ft.SEED_LABELS)
        w = ft.choose(table, ft.SEED_LABELS[0])
        explored = ft.simplex(runs, questions, depth) if explore else None
        command = (f"EVICHAIN_LLM_REPLAY=1 python -m stages.tune_seed_fusion --dataset {dataset}"
                   + "".join(f" --explore {name}" for name in explore))
        write_text(ft.seed_markdown(dataset, len(questions), table, w, names, depth, gamma,
                                    command, explore, explored),
                   TUNING_DIR / f"{dataset}-seed_fusion.md")
        json_path = TUNING_DIR / f"{dataset}-seed_fusion.json"
        write_json(ft.seed_record(dataset, len(questions), table, w, names, depth, gamma),
                   json_path)
        for name, used in usage.items():
            check_failure_rate(int(used.get("failures", 0)), int(used.get("requests", 0)),
                               params.llm.max_failure_rate, key="llm.max_failure_rate",
                               what=f"LLM requests of {name}", see=json_path)
        return {"dataset": dataset, "runs": names, "chosen_w": w, "questions": len(questions),
                "llm_calls": {name: used.get("calls", 0) for name, used in usage.items()}}

    run_stage(f"tune_seed_fusion@{dataset}", body)


if __name__ == "__main__":
    app()
