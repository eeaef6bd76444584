"""Choose the weight w of ``seeds-fused`` (ours, issue 38) on a tuning sample only.

Issue 38 asks for a combination of EviReform and CEE (neither paper combines them). Their
``robust`` variants rank from different evidence: EviReform's LLM-selected propositions and
residual queries propagated through shared entities, CEE's evidence-conditioned probes over a
bridge-expanded pool. ``seeds-fused`` fuses the two runs with
:func:`evichain.retrieval.fusion.score_fusion` (f = w · s_EviReform / max + (1 − w) ·
s_CEE / max, the ``fuse_seeds`` stage's code). For w ∈ {0, 0.1, …, 1} this script scores the
fused run with :mod:`evichain.metrics.retrieval` and applies ``scripts/tune_fusion.py``'s rule
(max R@5 + Chain@5; ties: the middle of the tied w, rounded to 0.1).

Runs: a run stored at ``artifacts/<dataset>/runs/<name>.parquet`` is read
(``EVICHAIN_LLM_REPLAY=1 dvc repro retrieve_evireform@2wiki_tune_s-robust``); ``cee-robust``
is computed here with ``params.yaml``'s CEE robust settings (its LLM answers are
``tune_cee``'s, recorded in ``reproduce/2wiki_tune_s-cee-llm-cache.sqlite``, so
``EVICHAIN_LLM_REPLAY=1`` replays it with 0 model calls) and ``proprag`` with
``retrieve_graph``'s code (LLM-free). ``--explore proprag`` adds a table of every weighting
of the block's runs and the extra runs on a 0.1 simplex (for reading only; no choice is made
from it).

Run: ``EVICHAIN_LLM_REPLAY=1 python scripts/tune_seed_fusion.py [--explore proprag]``; writes
``scripts/tune_seed_fusion.results.md`` and ``reports/tuning/<dataset>-seed_fusion.json`` (runs,
depth, chosen w, grid rows), the record the ``fuse_seeds`` stage fuses by (its params file in
``dvc.yaml``). Refuses a dataset outside ``tuning_datasets``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from evichain.config import Params, load_params  # noqa: E402
from evichain.io import read_parquet, write_json, write_text  # noqa: E402
from evichain.paths import DatasetPaths  # noqa: E402
from evichain.retrieval.fusion import score_fusion  # noqa: E402
from evichain.retrieval.params import FusionParams  # noqa: E402
from scripts.tune_fusion import GRID, RULE, choose, grid, scores  # noqa: E402
from stages.fuse import SEEDS_NAME  # noqa: E402

OUT = Path(__file__).with_suffix(".results.md")
W = "w (EviReform robust)"
RUNS: tuple[str, str] = ("evireform-robust", "cee-robust")


def load_run(P: Params, dataset: str, name: str) -> pd.DataFrame:
    """The stored run, or ``cee-robust`` / ``proprag`` computed here (module docstring)."""
    paths = DatasetPaths(dataset)
    if paths.run(name).exists():
        return read_parquet(paths.run(name))
    if name == "cee-robust":
        from flows.cee import run_method as cee_run
        out = cee_run(paths, "cee", "robust", P, stage="tune_seed_fusion")
        print(f"cee-robust on {dataset}: {out.summary['llm_usage'].get('calls', 0)} model calls")
        return out.run
    if name == "proprag":
        from flows.graph import run_method as graph_run
        return graph_run(paths, "proprag", "", P, stage="tune_seed_fusion").run
    raise SystemExit(f"{paths.run(name)} missing and {name!r} is not computed here")


def simplex(runs: dict[str, pd.DataFrame], questions: pd.DataFrame, depth: int) -> pd.DataFrame:
    """Every weighting of ``runs`` on the 0.1 simplex, best R@5 + Chain@5 first."""
    rows = []
    for ks in itertools.product(range(11), repeat=len(runs)):
        if sum(ks) != 10:
            continue
        w = {name: k / 10 for name, k in zip(runs, ks)}
        rows.append({**{f"w {n}": x for n, x in w.items()},
                     **scores(score_fusion(runs, w, depth), questions)})
    table = pd.DataFrame(rows)
    table["R@5 + Chain@5"] = table["Recall@5"] + table["Chain@5"]
    return table.sort_values("R@5 + Chain@5", ascending=False, kind="stable")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="2wiki_tune_s")
    ap.add_argument("--explore", nargs="*", default=[], help="extra runs for the simplex table")
    args = ap.parse_args()
    P = load_params("params.yaml")
    if args.dataset not in P.tuning_datasets:
        raise SystemExit(f"{args.dataset!r} is not in tuning_datasets {P.tuning_datasets}")
    block = FusionParams(name=SEEDS_NAME, runs=list(RUNS), weights=[0.5, 0.5], depth=P.fusion.depth)
    questions = read_parquet(DatasetPaths(args.dataset).questions)
    runs = {name: load_run(P, args.dataset, name) for name in [*block.runs, *args.explore]}
    table = grid(runs[block.runs[0]], runs[block.runs[1]], questions, block.depth,
                 labels=(W, "1 − w (CEE robust)"))
    w = choose(table, W)
    text = (f"# seeds-fused weights: {args.dataset} ({len(questions)} questions, tuning only)\n\n"
            f"`EVICHAIN_LLM_REPLAY=1 python scripts/tune_seed_fusion.py --dataset {args.dataset}"
            f"{' --explore ' + ' '.join(args.explore) if args.explore else ''}`. Fused = w · "
            f"{block.runs[0]}/max + (1 − w) · {block.runs[1]}/max per question "
            f"(evichain/retrieval/fusion.py), top {block.depth} (= fusion.depth); "
            f"cee.bridge_inherit = {P.cee.bridge_inherit}. Rule: {RULE} → **w = {w}** (read by "
            "the fuse_seeds stage from the JSON record).\n\n" + table.to_markdown(index=False) + "\n")
    if args.explore:
        text += ("\n## Exploration (for reading only): with " + ", ".join(args.explore)
                 + ", the 10 best weightings\n\n"
                 + simplex(runs, questions, block.depth).head(10).to_markdown(index=False) + "\n")
    write_text(text, OUT)
    write_json({"dataset": args.dataset, "n_questions": len(questions), "rule": RULE,
                "grid": list(GRID), "runs": block.runs, "chosen_w": w, "depth": block.depth,
                "bridge_inherit": P.cee.bridge_inherit,
                "rows": table.to_dict(orient="records")},
               Path("reports/tuning") / f"{args.dataset}-seed_fusion.json")
    print(text)


if __name__ == "__main__":
    main()
