"""Where an iterative baseline found its gold passages: first retrieval step against later steps.

Reads ``artifacts/<dataset>/traces/<method>.parquet`` (``step_retrieved_ids``: the passages each
step retrieved, in step order) and ``artifacts/<dataset>/questions.parquet``
(``gold_passage_ids``). A gold passage counts for the first step that retrieved it; shares are
over all gold passages of the questions in the trace (micro average, percentages). For GeAR,
whose traces also hold ``expanded_ids`` (the passages each step's graph expansion added), the
gold passages that only an expansion reached are counted apart (they are in "never" of the step
shares, which count retrieval only). Also prints the stage's own trace summary
(:func:`evichain.methods.iterative.common.summarize`: stop reasons, repairs, per-question
means), so the README's trace figures can be checked:

    .venv/bin/python scripts/iterative_steps.py musique self_ask
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence

import pandas as pd

from evichain.io import read_parquet
from evichain.methods.iterative.common import summarize
from evichain.paths import DatasetPaths


def first_step(gold: Sequence[str], steps: Sequence[Sequence[str]]) -> dict[str, int | None]:
    """For each gold id, the 1-based index of the first step that retrieved it (None: never)."""
    found: dict[str, int | None] = {g: None for g in gold}
    for i, ids in enumerate(steps, start=1):
        for pid in ids:
            if pid in found and found[pid] is None:
                found[pid] = i
    return found


def step_shares(traces: pd.DataFrame, questions: pd.DataFrame) -> dict[str, float | int]:
    """Gold passages found at step 1, at a later step, never (percent of all gold passages), and
    the number of questions that gain a gold passage after step 1."""
    gold = questions.set_index("question_id")["gold_passage_ids"]
    counts: Counter[str] = Counter()
    gained = 0
    for qid, steps in zip(traces["question_id"], traces["step_retrieved_ids"]):
        found = first_step(list(gold[qid]), [list(s) for s in steps])
        later = sum(1 for s in found.values() if s is not None and s > 1)
        counts.update(first=sum(1 for s in found.values() if s == 1), later=later,
                      never=sum(1 for s in found.values() if s is None))
        gained += later > 0
    total = sum(counts.values()) or 1
    return {"gold_passages": total, "first_step_pct": round(100 * counts["first"] / total, 1),
            "later_steps_pct": round(100 * counts["later"] / total, 1),
            "never_pct": round(100 * counts["never"] / total, 1), "questions_gaining_later": gained}


def expansion_only(traces: pd.DataFrame, questions: pd.DataFrame) -> dict[str, float | int]:
    """Gold passages reached by a graph expansion (``expanded_ids``) and by no retrieval step
    (percent of all gold passages), and the questions with at least one; {} without expansions."""
    if "expanded_ids" not in traces:
        return {}
    gold = questions.set_index("question_id")["gold_passage_ids"]
    only = gained = total = 0
    for qid, steps, expanded in zip(traces["question_id"], traces["step_retrieved_ids"],
                                    traces["expanded_ids"]):
        retrieved = {pid for ids in steps for pid in ids}
        reached = {pid for ids in expanded for pid in ids} - retrieved
        n = len(set(gold[qid]) & reached)
        only, gained, total = only + n, gained + (n > 0), total + len(gold[qid])
    return {"expansion_only_pct": round(100 * only / (total or 1), 1),
            "questions_gaining_by_expansion": gained}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("method")
    args = parser.parse_args()
    paths = DatasetPaths(args.dataset)
    traces = read_parquet(paths.trace(args.method))
    questions = read_parquet(paths.questions)
    out = {**summarize(args.method, traces), **step_shares(traces, questions),
           **expansion_only(traces, questions)}
    print(json.dumps(out, indent=1, default=int))


if __name__ == "__main__":
    main()
