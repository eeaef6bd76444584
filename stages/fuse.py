"""DVC stages ``fuse@<dataset>`` and ``fuse_seeds@<dataset>`` (ours, issue 38): stored runs fused
into ``runs/<name>.parquet``.

Without ``--record``: ``params.yaml``'s ``fusion`` block, ``evireform-fused`` = EviReform
robust ⊕ PropRAG. With ``--record <tuning JSON>``: ``seeds-fused`` = the record's ``runs``
(EviReform robust ⊕ CEE robust) with weights (w, 1 − w), w = its ``chosen_w``, and its
``depth``; the record is ``scripts/tune_seed_fusion.py``'s, written on ``tuning_datasets`` only,
and ``dvc.yaml`` lists it as the stage's params file (a new ``params.yaml`` block would need a
new field in :mod:`evichain.config`, on which every stage depends). Reads the stored run tables
(and traces) of the fused methods, runs :func:`flows.fuse.fusion_flow` and writes the fused run
and a trace of the runs' LLM tokens per question; ``evaluate_fused@<dataset>`` /
``evaluate_seeds_fused@<dataset>`` score it like any other run.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from stages._common import run_stage

from evichain.paths import DatasetPaths  # noqa: E402  (after the environment defaults)
from evichain.retrieval.params import FusionParams  # noqa: E402

app = typer.Typer(add_completion=False)

SEEDS_NAME = "seeds-fused"


def record_fusion(path: Path, taken: str) -> FusionParams:
    """``seeds-fused``'s fusion settings from a tuning record (module docstring); ``taken`` is
    ``fusion.name``, which it must not overwrite."""
    rec = json.loads(path.read_text())
    missing = [k for k in ("runs", "chosen_w", "depth") if k not in rec]
    if missing:
        raise ValueError(f"{path}: no {missing} (write it with scripts/tune_seed_fusion.py)")
    if SEEDS_NAME == taken:
        raise ValueError(f"fusion.name is {taken!r}, the name of the record's fused run")
    w = float(rec["chosen_w"])
    return FusionParams(name=SEEDS_NAME, runs=list(rec["runs"]), weights=[w, round(1.0 - w, 10)],
                        depth=int(rec["depth"]))


@app.command()
def main(dataset: str = typer.Option(...),
         record: Path | None = typer.Option(None, help="a tuning record to fuse by (seeds-fused)"),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.io import write_parquet
        from flows.common import with_runner
        from flows.fuse import fusion_flow

        params = load_params(params_file)
        paths = DatasetPaths(dataset)
        fusion = params.fusion if record is None else record_fusion(record, params.fusion.name)
        run, trace = with_runner(fusion_flow, params.orchestration)(
            {name: paths.run(name) for name in fusion.runs}, fusion,
            {name: paths.trace(name) for name in fusion.runs})
        write_parquet(run, paths.run(fusion.name))
        write_parquet(trace, paths.trace(fusion.name))
        return {"dataset": dataset, "method": fusion.name, "runs": fusion.runs,
                "weights": fusion.weights, "questions": int(run["question_id"].nunique())}

    run_stage(f"{'fuse' if record is None else 'fuse_seeds'}@{dataset}", body)


if __name__ == "__main__":
    app()
