"""Recompute every retrieval metrics JSON from the run files with plain Python and compare.

Independent of ir-measures/pytrec_eval: sets and loops only. For every
``reports/metrics/<ds>/<method>.json`` with questions, it reads ``artifacts/<ds>/runs/<method>.parquet``
and ``questions.parquet``, applies the same question filter (gold-reliable on 2Wiki/demo) and
reports the largest absolute difference per file. Usage:

    .venv/bin/python scripts/crosscheck_metrics.py [--out scripts/crosscheck_metrics.results.md]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pandas as pd

KS = (1, 2, 5, 10, 20)


def per_question(ranked: list[str], gold: set[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in KS:
        top = set(ranked[:k])
        hit = len(top & gold)
        out[f"Recall@{k}"] = hit / len(gold)
        out[f"Chain@{k}"] = float(gold <= top)
        out[f"Hit@{k}"] = float(hit > 0)
    precisions = [sum(p in gold for p in ranked[: i + 1]) / (i + 1)
                  for i, p in enumerate(ranked[:10]) if p in gold]
    out["MAP@10"] = sum(precisions) / len(gold)
    dcg = sum(1 / math.log2(i + 2) for i, p in enumerate(ranked[:10]) if p in gold)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(len(gold), 10)))
    out["nDCG@10"] = dcg / idcg
    return out


def check(ds: str, method: str, stored: dict) -> float:
    art = Path("artifacts") / ds
    questions = pd.read_parquet(art / "questions.parquet")
    if stored.get("question_filter") == "gold_reliable":
        questions = questions[questions["gold_reliable"]]
    run = pd.read_parquet(art / "runs" / f"{method}.parquet").sort_values(["question_id", "rank"])
    ranked = {q: list(g["passage_id"]) for q, g in run.groupby("question_id")}
    rows = [per_question(ranked.get(q, []), set(g)) for q, g in
            zip(questions["question_id"], questions["gold_passage_ids"]) if len(g)]
    means = pd.DataFrame(rows).mean()
    return max(abs(means[m] - stored[m]) for m in means.index if m in stored)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="scripts/crosscheck_metrics.results.md")
    args = parser.parse_args()
    lines = ["# Metrics cross-check (plain Python vs the pipeline's ir-measures metrics)", "",
             "| dataset | method | questions | max abs difference |", "|---|---|---:|---:|"]
    for path in sorted(Path("reports/metrics").glob("*/*.json")):
        stored = json.loads(path.read_text())
        ds, method = path.parent.name, path.stem
        if method.startswith("qa-") or not stored.get("n_questions"):
            continue
        if not (Path("artifacts") / ds / "runs" / f"{method}.parquet").exists():
            continue
        diff = check(ds, method, stored)
        lines.append(f"| {ds} | {method} | {stored['n_questions']} | {diff:.2e} |")
        print(lines[-1])
    Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
