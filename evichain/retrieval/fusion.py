"""Run-level score fusion (ours, issue 38): one ranking from several methods' run tables.

For question q, runs m = 1..M with weights w_m and stored scores s_m(q, p) ≥ 0:

    f(q, p) = Σ_m w_m · s_m(q, p) / max_p' s_m(q, p')

where a passage absent from run m contributes 0 for m (its score there is below the run's
cut-off) and a run whose scores are all 0 for q contributes nothing. Each run is scaled by its
own maximum, so the weights compare the runs' shapes, not their score units (EviReform's Eq. 15
readout and PropRAG's PPR probabilities differ by orders of magnitude). The fused run keeps
the ``depth`` best passages; ties go to the better best rank over the runs, then the passage id.

Used for ``evireform-fused`` = EviReform ``robust`` ⊕ PropRAG: the LLM's evidence-guided
ranking and the LLM-free proposition-path walk, whose errors the tuning sample showed to be
different (``scripts/tune_fusion.results.md``). Neither paper fuses with another retriever.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from evichain.metrics.cost import token_columns
from evichain.retrieval.params import FusionParams
from evichain.retrieval.run import RUN_COLUMNS, run_table

SEEDS_FUSED = "seeds-fused"
"""The name of the fused run of the seed-fusion tuning record (``fuse_seeds`` stage, ``fused``
method)."""


def scaled_scores(run: pd.DataFrame, name: str) -> pd.DataFrame:
    """``question_id, passage_id, rank, scaled``: s(q, p) / max_p' s(q, p') (0 where the max is 0).

    Raises ValueError naming the run when a score is negative or not finite (max-scaling
    needs s ≥ 0; min-max would change the tuned method)."""
    missing = [c for c in RUN_COLUMNS if c not in run.columns]
    if missing:
        raise ValueError(f"run {name!r}: missing columns {missing}")
    scores = run["score"].astype("float64")
    if not np.isfinite(scores.to_numpy()).all() or (scores < 0).any():
        raise ValueError(f"run {name!r}: scores must be finite and >= 0 for max-scaling")
    top = scores.groupby(run["question_id"]).transform("max")
    scaled = (scores / top.where(top > 0)).fillna(0.0)
    return pd.DataFrame({"question_id": run["question_id"], "passage_id": run["passage_id"],
                         "rank": run["rank"].astype("int64"), "scaled": scaled})


def score_fusion(runs: Mapping[str, pd.DataFrame], weights: Mapping[str, float],
                 depth: int) -> pd.DataFrame:
    """The fused run table (module docstring): Σ_m w_m · max-scaled s_m, top ``depth`` per question.

    Every question of any run is kept; ``weights`` must name exactly the runs, each ≥ 0."""
    if set(runs) != set(weights):
        raise ValueError(f"weights name {sorted(weights)} but the runs are {sorted(runs)}")
    if any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
        raise ValueError(f"fusion weights must be >= 0 with a positive sum, got {dict(weights)}")
    parts = []
    for name, run in runs.items():
        part = scaled_scores(run, name)
        part["scaled"] *= float(weights[name])
        parts.append(part)
    both = pd.concat(parts, ignore_index=True)
    fused = both.groupby(["question_id", "passage_id"], sort=False).agg(
        score=("scaled", "sum"), best_rank=("rank", "min")).reset_index()
    fused = fused.sort_values(["question_id", "score", "best_rank", "passage_id"],
                              ascending=[True, False, True, True], kind="mergesort")
    fused = fused.groupby("question_id", sort=False).head(depth)
    fused["rank"] = fused.groupby("question_id", sort=False).cumcount() + 1
    rows = list(fused[RUN_COLUMNS].itertuples(index=False, name=None))
    return run_table(rows)


def fused_trace(traces: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per question, the LLM tokens each fused run spent: ``<run>_prompt_tokens`` and
    ``<run>_completion_tokens`` = the row sums of that run's token columns
    (:mod:`evichain.metrics.cost` convention), so the fused method's cost is the sum of its
    runs' (a run without a trace, or without token columns, spent none)."""
    parts = []
    for name, trace in traces.items():
        cols = token_columns(trace)
        out = pd.DataFrame({"question_id": trace["question_id"]})
        for kind in ("prompt_tokens", "completion_tokens"):
            mine = [c for c in cols if str(c).endswith(kind)]
            out[f"{name}_{kind}"] = trace[mine].fillna(0).sum(axis=1).astype("int64") if mine else 0
        parts.append(out.set_index("question_id"))
    if not parts:
        return pd.DataFrame({"question_id": pd.Series(dtype="str")})
    return pd.concat(parts, axis=1).fillna(0).astype("int64").reset_index()


def record_fusion(path: Path, name: str = SEEDS_FUSED) -> FusionParams:
    """Fusion settings of a tuning record (``scripts/tune_seed_fusion.py``'s JSON) under
    ``name``: the record's two ``runs`` with weights (w, 1 − w), w = its ``chosen_w``, and its
    ``depth``. A record without one of those keys is a ValueError naming the file."""
    rec = json.loads(Path(path).read_text(encoding="utf-8"))
    missing = [k for k in ("runs", "chosen_w", "depth") if k not in rec]
    if missing:
        raise ValueError(f"{path}: no {missing} (write it with scripts/tune_seed_fusion.py)")
    w = float(rec["chosen_w"])
    return FusionParams(name=name, runs=list(rec["runs"]), weights=[w, round(1.0 - w, 10)],
                        depth=int(rec["depth"]))
