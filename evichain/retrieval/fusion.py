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
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from evichain.metrics.cost import token_columns
from evichain.metrics.frames import as_polars
from evichain.retrieval.params import FusionParams
from evichain.retrieval.run import RUN_COLUMNS, run_table

if TYPE_CHECKING:
    import pandas as pd

SEEDS_FUSED = "seeds-fused"
"""The name of the fused run of the seed-fusion tuning record (``fuse_seeds`` stage, ``fused``
method)."""

_TOKEN_KINDS = ("prompt_tokens", "completion_tokens")


def scaled_scores(run: pl.DataFrame | pd.DataFrame, name: str) -> pl.DataFrame:
    """``question_id, passage_id, rank, scaled``: s(q, p) / max_p' s(q, p') (0 where the max is 0).

    Raises ValueError naming the run when a score is negative or not finite (max-scaling
    needs s ≥ 0; min-max would change the tuned method)."""
    missing = [c for c in RUN_COLUMNS if c not in run.columns]
    if missing:
        raise ValueError(f"run {name!r}: missing columns {missing}")
    table = as_polars(run)
    scores = table["score"].cast(pl.Float64).to_numpy()  # a null score reads as NaN
    if not np.isfinite(scores).all() or (scores < 0).any():
        raise ValueError(f"run {name!r}: scores must be finite and >= 0 for max-scaling")
    score = pl.col("score").cast(pl.Float64)
    top = score.max().over("question_id")
    return table.select("question_id", "passage_id", pl.col("rank").cast(pl.Int64),
                        pl.when(top > 0).then(score / top).otherwise(0.0).alias("scaled"))


def fused_scores(runs: Mapping[str, pl.DataFrame | pd.DataFrame],
                 weights: Mapping[str, float]) -> pl.DataFrame:
    """``question_id, passage_id, score, best_rank`` per pair in any run, in order of first
    appearance (runs in ``runs`` order): score = Σ_m w_m · max-scaled s_m (the sum in run
    order), best_rank = min_m rank_m."""
    parts = [scaled_scores(run, name).with_columns(pl.col("scaled") * float(weights[name]))
             for name, run in runs.items()]
    return (pl.concat(parts, how="vertical_relaxed")
            .group_by(["question_id", "passage_id"], maintain_order=True)
            .agg(pl.col("scaled").sum().alias("score"), pl.col("rank").min().alias("best_rank")))


def fused_rows(runs: Mapping[str, pl.DataFrame | pd.DataFrame], weights: Mapping[str, float],
               depth: int) -> list[tuple[str, int, str, float]]:
    """The fused run's ``(question_id, rank, passage_id, score)`` rows (module docstring):
    Σ_m w_m · max-scaled s_m, top ``depth`` per question.

    Order: question_id ascending, then score descending, best rank ascending, passage id
    ascending (a total order, so no tie is left to the sort); rank = 1 + position in the
    question. Every question of any run is kept; ``weights`` must name exactly the runs, each
    ≥ 0."""
    if set(runs) != set(weights):
        raise ValueError(f"weights name {sorted(weights)} but the runs are {sorted(runs)}")
    if any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
        raise ValueError(f"fusion weights must be >= 0 with a positive sum, got {dict(weights)}")
    position = pl.int_range(pl.len()).over("question_id")
    fused = (fused_scores(runs, weights)
             .sort(["question_id", "score", "best_rank", "passage_id"],
                   descending=[False, True, False, False], maintain_order=True)
             .filter(position < depth)
             .with_columns((position + 1).alias("rank")))
    return fused.select(RUN_COLUMNS).rows()


def score_fusion(runs: Mapping[str, pl.DataFrame | pd.DataFrame], weights: Mapping[str, float],
                 depth: int) -> pd.DataFrame:
    """The fused run table of :func:`fused_rows`, as a :func:`~evichain.retrieval.run.run_table`
    (the run type every method and stage reads)."""
    return run_table(fused_rows(runs, weights, depth))


def trace_tokens(name: str, trace: pl.DataFrame | pd.DataFrame) -> pl.DataFrame:
    """``question_id, <name>_prompt_tokens, <name>_completion_tokens`` of one run's trace: per
    row, the sum of its columns ending in that kind (missing counts as 0; 0 where it has none)."""
    cols = token_columns(trace)
    table = as_polars(trace[["question_id", *cols]])  # only these: the rest may not convert
    sums = []
    for kind in _TOKEN_KINDS:
        mine = [pl.col(c).fill_nan(0) if table.schema[c].is_float() else pl.col(c)
                for c in cols if c.endswith(kind)]
        total = pl.sum_horizontal([m.fill_null(0) for m in mine]) if mine else pl.lit(0)
        sums.append(total.cast(pl.Int64).alias(f"{name}_{kind}"))
    return table.select("question_id", *sums)


def fused_trace(traces: Mapping[str, pl.DataFrame | pd.DataFrame]) -> pl.DataFrame:
    """Per question, the LLM tokens each fused run spent: ``<run>_prompt_tokens`` and
    ``<run>_completion_tokens`` = the row sums of that run's token columns
    (:mod:`evichain.metrics.cost` convention), so the fused method's cost is the sum of its
    runs' (a run without a trace, or without token columns, spent none).

    Questions: those of the first trace in its order, then each later trace's new ones (an
    outer join); a question absent from a trace has 0 tokens there."""
    parts = [trace_tokens(name, trace) for name, trace in traces.items()]
    if not parts:
        return pl.DataFrame(schema={"question_id": pl.String})
    out = parts[0]
    for part in parts[1:]:
        out = out.join(part, on="question_id", how="full", coalesce=True, maintain_order="left_right")
    return out.with_columns(pl.exclude("question_id").fill_null(0).cast(pl.Int64))


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
