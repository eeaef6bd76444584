"""CatRAG with one of its three changes switched off, replayed from a recorded LLM cache.

Runs the ``retrieve_graph`` flow for CatRAG with ``graph.catrag.<switch>: false`` in replay mode
(``EVICHAIN_LLM_REPLAY=1``: no model is started, every answer comes from ``--cache``) and prints
each variant's paired bootstrap difference (the report's :func:`paired_contrasts`, 95% CI,
points) against full CatRAG and HippoRAG 2 from ``reports/eval/<dataset>/``. A variant whose
prompts the full run never sent (e.g. no anchoring: other seeds, other scoring prompts) meets
replay misses; the script prints how many questions had one, and such a variant is not a
measurement. Nothing under ``artifacts/`` or ``reports/`` is written. Usage:

    .venv/bin/python scripts/catrag_ablation.py musique \\
        --cache reproduce/musique-catrag-llm-cache.sqlite no_key_fact no_edge_weighting
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from evichain.config import Params
    from evichain.paths import DatasetPaths

VARIANTS: dict[str, dict[str, bool]] = {
    "no_key_fact": {"key_fact": False},
    "no_anchoring": {"symbolic_anchoring": False},
    "no_edge_weighting": {"edge_weighting": False},
    "key_fact_only": {"symbolic_anchoring": False, "edge_weighting": False},
}
METRICS = ("Recall@2", "Recall@5", "Recall@10", "Chain@5", "nDCG@10")
KS = [1, 2, 5, 10, 20]


def run_variant(paths: DatasetPaths, params: Params, questions: pd.DataFrame,
                name: str) -> tuple[pd.DataFrame, int]:
    """Per-question metrics of CatRAG with ``VARIANTS[name]`` applied, and the number of
    questions whose trace records a failed (here: unrecorded) LLM call
    (:func:`stages._common.failed_questions`, the stage guard's count)."""
    from evichain.metrics.retrieval import per_question_metrics
    from flows.graph import run_retrieval
    from stages._common import failed_questions

    catrag = params.graph.catrag.model_copy(update=VARIANTS[name])
    graph = params.graph.model_copy(update={"catrag": catrag})
    out = run_retrieval(paths, graph, "catrag", params.llm, params.embed, orch=params.orchestration,
                        stage=f"catrag-ablation-{name}")
    return per_question_metrics(out.run, questions, KS), failed_questions(out.trace)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("variants", nargs="*", help=f"any of {list(VARIANTS)} (default: all)")
    ap.add_argument("--cache", type=Path, required=True, help="recorded LLM cache (read from a copy)")
    args = ap.parse_args()
    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {list(VARIANTS)}")
    copy = Path(tempfile.mkdtemp()) / "replay.sqlite"
    shutil.copyfile(args.cache, copy)
    os.environ.update(EVICHAIN_LLM_REPLAY="1", EVICHAIN_LLM_CACHE=str(copy))
    import stages._common  # noqa: F401  (offline, quiet environment defaults)
    from evichain.config import load_params
    from evichain.io import read_parquet
    from evichain.paths import DatasetPaths
    from evichain.report.ablations import paired_contrasts

    params, paths = load_params(Path("params.yaml")), DatasetPaths(args.dataset)
    questions = read_parquet(paths.questions)
    per_q = {m: read_parquet(Path("reports/eval") / args.dataset / f"{m}.parquet")
             for m in ("catrag", "hipporag2")}
    for name in args.variants or VARIANTS:
        per_q[name], failed = run_variant(paths, params, questions, name)
        print(f"## {name}: {failed} questions with an unrecorded LLM call")
        pairs = [(f"{name} − catrag", name, "catrag"), (f"{name} − hipporag2", name, "hipporag2")]
        rows = paired_contrasts(per_q, args.dataset, pairs, METRICS)
        print(rows[["metric", "contrast", "a_mean", "b_mean", "difference", "ci_low", "ci_high"]]
              .to_string(index=False))


if __name__ == "__main__":
    main()
