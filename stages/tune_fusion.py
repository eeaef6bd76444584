"""DVC stage ``tune_fusion@<dataset>``: the weight w of ``evireform-fused`` (ours, issue 38) =
EviReform ``robust`` (w) ⊕ PropRAG (1 − w), on a dataset of ``tuning_datasets`` only.

Reads robust's stored run (``retrieve_evireform@<dataset>-robust``) and runs PropRAG here
(LLM-free, ``retrieve_graph``'s code and ``graph`` params: ``baseline_datasets`` leaves the
tuning sample out). The grid and the rule are :mod:`evichain.retrieval.fusion_tuning`'s.
Writes ``reports/tuning/<dataset>-fusion.json`` (dataset, question count, rule, grid, metrics,
chosen w, ``fusion.weights`` at the time, grid rows) and ``reports/tuning/<dataset>-fusion.md``
(the same grid for reading, with PropRAG's wall time). The chosen w is copied into
``params.yaml``'s ``fusion.weights`` by hand; ``tests/retrieval/test_fusion.py`` checks that they agree.
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import run_stage
from stages._tuning import TUNING_DIR, require_tuning_dataset

app = typer.Typer(add_completion=False)


@app.command()
def main(dataset: str = typer.Option(...),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        import time

        from evichain.config import load_params
        from evichain.io import read_parquet, write_json, write_text
        from evichain.paths import DatasetPaths
        from evichain.retrieval import fusion_tuning as ft
        from flows.method import run_method

        params = load_params(params_file)
        require_tuning_dataset(params, dataset)
        paths = DatasetPaths(dataset)
        robust = read_parquet(paths.run("evireform-robust"))
        questions = read_parquet(paths.questions)
        start = time.perf_counter()
        proprag = run_method(paths, "proprag", None, params, stage="tune_fusion").run
        seconds = time.perf_counter() - start
        depth, weights = params.fusion.depth, list(params.fusion.weights)
        table = ft.grid(robust, proprag, questions, depth)
        w = ft.choose(table)
        command = f"python -m stages.tune_fusion --dataset {dataset}"
        write_text(ft.fusion_markdown(dataset, len(questions), table, w, depth, weights, seconds,
                                      command), TUNING_DIR / f"{dataset}-fusion.md")
        write_json(ft.fusion_record(dataset, len(questions), table, w, weights),
                   TUNING_DIR / f"{dataset}-fusion.json")
        return {"dataset": dataset, "chosen_w": w, "fusion.weights": weights,
                "questions": len(questions)}

    run_stage(f"tune_fusion@{dataset}", body)


if __name__ == "__main__":
    app()
