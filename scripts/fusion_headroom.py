"""How much of the per-question headroom between its runs ``evireform-fused`` takes (issue 38).

For each dataset of ``fusion_datasets`` and each metric, from the committed per-question tables
``reports/eval/<dataset>/<method>.parquet`` (no run is re-made):

* the mean of every input run of ``params.fusion`` and of the fused run, in points;
* ``best-of``: mean over questions of max_m metric_m(q), the score of an oracle that picks, per
  question, the better input run. It is not a bound on fusion (the fused top k can mix gold
  passages from both runs), but it says how much a per-question choice of run could add;
* ``captured``: (fused − best single run) / (best-of − best single run), in %;
* per-question counts: fused below the worse run, between the two, at or above the better one,
  and above the better one (a question both runs only half-answer, answered by the mix).

Run: ``python scripts/fusion_headroom.py [--datasets 2wiki_s musique]``; writes
``scripts/fusion_headroom.results.md``. A method missing from ``reports/eval`` is an error
that names it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evichain.config import load_params  # noqa: E402
from evichain.io import write_text  # noqa: E402
from evichain.report.main_report import per_question_tables  # noqa: E402
from evichain.report.tables import render_plain_markdown  # noqa: E402

METRICS = ("Recall@5", "Chain@5", "Recall@10")
OUT = Path(__file__).with_suffix(".results.md")


def load_tables(eval_dir: Path, dataset: str, methods: list[str]) -> dict[str, pd.DataFrame]:
    """The report's per-question tables of ``methods`` (:func:`per_question_tables`, so the same
    question filter), indexed by ``question_id`` and restricted to the questions all share."""
    available = per_question_tables(eval_dir / dataset)
    for m in methods:
        if m not in available:
            raise SystemExit(f"{eval_dir / dataset / m}.parquet missing: evaluate {m} on {dataset} first")
    tables = {m: available[m].set_index("question_id") for m in methods}
    shared = sorted(set.intersection(*(set(t.index) for t in tables.values())))
    return {m: t.loc[shared] for m, t in tables.items()}


def headroom_row(tables: dict[str, pd.DataFrame], runs: list[str], fused: str, metric: str) -> dict:
    """One table row for ``metric`` (module docstring); means in points."""
    inputs = np.column_stack([tables[m][metric].to_numpy(float) for m in runs])
    f = tables[fused][metric].to_numpy(float)
    lo, hi, best_of = inputs.min(axis=1), inputs.max(axis=1), inputs.max(axis=1).mean()
    best_single = inputs.mean(axis=0).max()
    gap = best_of - best_single
    captured = 100 * (f.mean() - best_single) / gap if gap > 0 else float("nan")
    eps = 1e-12
    return {"metric": metric, "n": len(f),
            **{m: round(100 * inputs[:, k].mean(), 2) for k, m in enumerate(runs)},
            fused: round(100 * f.mean(), 2), "best-of": round(100 * best_of, 2),
            "captured %": round(captured, 1),
            "< worse": int((f < lo - eps).sum()),
            "between": int(((f >= lo - eps) & (f < hi - eps)).sum()),
            ">= better": int((f >= hi - eps).sum()),
            "> better": int((f > hi + eps).sum())}


def headroom_table(eval_dir: Path, dataset: str, runs: list[str], fused: str) -> pd.DataFrame:
    """Rows of :func:`headroom_row` for every metric of ``METRICS``."""
    tables = load_tables(eval_dir, dataset, [*runs, fused])
    return pd.DataFrame([headroom_row(tables, runs, fused, m) for m in METRICS])


def main() -> None:
    P = load_params("params.yaml")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=list(P.fusion_datasets))
    ap.add_argument("--eval-dir", type=Path, default=Path("reports/eval"))
    args = ap.parse_args()
    runs, fused = list(P.fusion.runs), P.fusion.name
    parts = [f"# {fused}: per-question headroom between its runs\n\n"
             f"`python scripts/fusion_headroom.py`, from the committed per-question tables "
             f"(`{args.eval_dir}/<dataset>/<method>.parquet`). Runs {runs}, weights "
             f"{P.fusion.weights}. best-of = mean of the better run per question (an oracle "
             "choice, not a bound on fusion); captured = (fused − best single run) / (best-of − "
             "best single run). Counts: questions where fused is below the worse run, between "
             "the two, at or above the better one, strictly above it.\n"]
    for ds in args.datasets:
        parts.append(f"\n## {ds}\n\n" + render_plain_markdown(headroom_table(args.eval_dir, ds, runs, fused)) + "\n")
    text = "".join(parts)
    write_text(text, OUT)
    print(text)


if __name__ == "__main__":
    main()
