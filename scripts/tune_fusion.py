"""Choose the ``fusion.weights`` of ``evireform-fused`` (issue 38) on a tuning sample only.

For w ∈ {0, 0.1, …, 1}: the fused run (:func:`evichain.retrieval.fusion.score_fusion`, the
code the ``fuse`` stage runs) of EviReform ``robust`` (weight w) and PropRAG (weight 1 − w),
scored with :mod:`evichain.metrics.retrieval`. w = 1 is robust alone, w = 0 PropRAG alone.

Inputs: robust's stored run on the tuning dataset (``EVICHAIN_LLM_REPLAY=1 dvc repro
retrieve_evireform@2wiki_tune_s-robust``: 0 model calls from the recorded answers) and PropRAG,
run here (LLM-free, ``retrieve_graph``'s code and params) since ``baseline_datasets`` leaves the
tuning sample out. Refuses a dataset outside ``tuning_datasets``.

Run: ``python scripts/tune_fusion.py [--dataset 2wiki_tune_s]``; writes
``scripts/tune_fusion.results.md`` (for reading) and ``reports/tuning/<dataset>-fusion.json``
(the record tests and tools read: dataset, question count, rule, grid rows, chosen w). The
selection rule: the weights that maximise R@5 + Chain@5; among ties, the middle of the tied
range (rounded to 0.1).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from evichain.config import Params, load_params  # noqa: E402
from evichain.io import read_parquet, write_json, write_text  # noqa: E402
from evichain.metrics.retrieval import per_question_metrics  # noqa: E402
from evichain.paths import DatasetPaths  # noqa: E402
from evichain.retrieval.fusion import score_fusion  # noqa: E402

METRICS = ("Recall@5", "Chain@5", "Recall@10", "nDCG@10")
OUT = Path(__file__).with_suffix(".results.md")
RULE = "max Recall@5 + Chain@5; ties: median of the tied w, rounded to 0.1"
GRID = tuple(round(0.1 * i, 1) for i in range(11))


def proprag_run(P: Params, dataset: str) -> tuple[pd.DataFrame, float]:
    """PropRAG's run on ``dataset`` (the retrieve_graph stage's entry, params.graph) and its
    wall seconds."""
    from flows.graph import run_method

    start = time.perf_counter()
    out = run_method(DatasetPaths(dataset), "proprag", "", P, stage="tune_fusion")
    return out.run, time.perf_counter() - start


def scores(run: pd.DataFrame, questions: pd.DataFrame) -> dict[str, float]:
    """Mean metrics (×100) of ``run`` over ``questions``."""
    pq = per_question_metrics(run, questions)
    return {m: round(100 * float(pq[m].mean()), 2) for m in METRICS}


def fused_at(robust: pd.DataFrame, proprag: pd.DataFrame, w: float, depth: int) -> pd.DataFrame:
    """The fused run with weight w on robust and 1 − w on PropRAG (the ``fuse`` stage's code)."""
    return score_fusion({"robust": robust, "proprag": proprag},
                        {"robust": w, "proprag": round(1 - w, 1)}, depth)


def grid(robust: pd.DataFrame, proprag: pd.DataFrame, questions: pd.DataFrame, depth: int,
         labels: tuple[str, str] = ("w (robust)", "1 − w (PropRAG)")) -> pd.DataFrame:
    """One row per weight w of the first run (the second gets 1 − w), its columns named
    ``labels`` (``scripts/tune_seed_fusion.py`` fuses two other runs the same way)."""
    rows = []
    for w in GRID:
        fused = fused_at(robust, proprag, w, depth)
        rows.append({labels[0]: w, labels[1]: round(1 - w, 1), **scores(fused, questions)})
    return pd.DataFrame(rows)


def choose(table: pd.DataFrame, column: str = "w (robust)") -> float:
    """The middle of the weights (``column``) tied at the best R@5 + Chain@5 (module docstring)."""
    total = table["Recall@5"] + table["Chain@5"]
    tied = table.loc[np.isclose(total, total.max()), column]
    return round(float(np.median(tied)), 1)


def record(dataset: str, n_questions: int, table: pd.DataFrame, w: float,
           params_weights: list[float]) -> dict[str, object]:
    """The JSON record of one tuning run (``reports/tuning/<dataset>-fusion.json``)."""
    return {"dataset": dataset, "n_questions": n_questions, "rule": RULE, "grid": list(GRID),
            "metrics": list(METRICS), "chosen_w": w, "params_weights": params_weights,
            "rows": table.to_dict(orient="records")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="2wiki_tune_s")
    args = ap.parse_args()
    P = load_params("params.yaml")
    if args.dataset not in P.tuning_datasets:
        raise SystemExit(f"{args.dataset!r} is not in tuning_datasets {P.tuning_datasets}")
    paths = DatasetPaths(args.dataset)
    robust_path = paths.run("evireform-robust")
    if not robust_path.exists():
        raise SystemExit(f"{robust_path} missing: EVICHAIN_LLM_REPLAY=1 dvc repro "
                         f"retrieve_evireform@{args.dataset}-robust")
    questions = read_parquet(paths.questions)
    proprag, seconds = proprag_run(P, args.dataset)
    table = grid(read_parquet(robust_path), proprag, questions, P.fusion.depth)
    w = choose(table)
    text = (f"# evireform-fused weights: {args.dataset} ({len(questions)} questions, tuning only)\n\n"
            f"`python scripts/tune_fusion.py --dataset {args.dataset}`. Fused = w · robust/max + "
            "(1 − w) · PropRAG/max per question (evichain/retrieval/fusion.py), top "
            f"{P.fusion.depth}. Rule: best R@5 + Chain@5, middle of the ties → **w = {w}** "
            f"(params.yaml `fusion.weights` = {P.fusion.weights}). PropRAG ran here in "
            f"{seconds:.1f} s wall for {len(questions)} questions (index load included).\n\n"
            + table.to_markdown(index=False) + "\n")
    write_text(text, OUT)
    write_json(record(args.dataset, len(questions), table, w, list(P.fusion.weights)),
               Path("reports/tuning") / f"{args.dataset}-fusion.json")
    print(text)


if __name__ == "__main__":
    main()
