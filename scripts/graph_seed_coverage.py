"""Gold passages behind the seeds of HippoRAG 2 and PropRAG, read from their traces.

Both methods end in Personalized PageRank; what differs is the evidence their seeds come from.
HippoRAG 2 seeds from the facts the recognition-memory filter kept (``kept_facts``: normalized
``(subject, predicate, object)`` triples, mapped back to their source passages through
``index/triples.parquet``); PropRAG seeds from the propositions on its stage-2 beam paths
(``stage2_paths``: ``"pid#i > pid#j (score)"``, mapped through ``index/propositions.parquet``).
For each method, per question: the number of distinct source passages, the share of the
question's gold passages among them, whether all gold passages are among them (a complete
chain), and the number of seed entities. Printed as means over the questions of the trace
(macro averages; shares in percent):

    .venv/bin/python scripts/graph_seed_coverage.py 2wiki_s
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from evichain.io import read_parquet
from evichain.methods.graph.graph import triple_facts
from evichain.paths import DatasetPaths

Fact = tuple[str, str, str]


def fact_passages(triples: pd.DataFrame, passage_ids: Sequence[str]) -> dict[Fact, set[str]]:
    """Normalized ``(subject, predicate, object)`` → the passages that state it, from the fact
    index HippoRAG 2 builds (:func:`evichain.methods.graph.graph.triple_facts`)."""
    _, index, _ = triple_facts(triples, passage_ids)
    ids = np.asarray(passage_ids)
    return {fact: set(ids[index.passages[i].indices].tolist()) for i, fact in enumerate(index.facts)}


def path_prop_ids(path: str) -> list[str]:
    """Proposition ids of one trace path string ``"a#0 > b#3 (0.7561)"``."""
    return path.rsplit(" (", 1)[0].split(" > ")


def coverage_row(gold: Sequence[str], passages: set[str], n_seeds: int) -> dict[str, float]:
    """Source passages, gold share (percent), complete chain (0/100) and seeds of one question."""
    share = len(set(gold) & passages) / max(len(set(gold)), 1)
    return {"passages": len(passages), "gold_pct": 100 * share,
            "complete_pct": 100.0 * (share == 1.0), "seeds": n_seeds}


def mean_rows(rows: Iterable[dict[str, float]]) -> dict[str, float]:
    """Column means of the per-question rows, rounded to 2 decimals."""
    frame = pd.DataFrame(list(rows))
    return {k: round(float(v), 2) for k, v in frame.mean().items()} | {"questions": len(frame)}


def hipporag2_coverage(traces: pd.DataFrame, gold: Mapping[str, Sequence[str]],
                       facts: Mapping[Fact, set[str]]) -> dict[str, float]:
    """Means over questions for the filter's kept facts; a kept fact missing from the index
    is an error (the trace and the index would not belong together)."""
    rows = []
    for qid, kept, n_seeds in zip(traces["question_id"], traces["kept_facts"],
                                  traces["n_seed_entities"]):
        keys = [tuple(str(x) for x in fact) for fact in kept]
        unknown = [k for k in keys if k not in facts]
        if unknown:
            raise SystemExit(f"{qid}: kept fact {unknown[0]!r} is not in index/triples.parquet")
        passages: set[str] = set().union(*(facts[k] for k in keys))
        rows.append(coverage_row(gold[qid], passages, int(n_seeds)))
    return mean_rows(rows)


def proprag_coverage(traces: pd.DataFrame, gold: Mapping[str, Sequence[str]],
                     prop_passage: Mapping[str, str]) -> dict[str, float]:
    """Means over questions for the propositions on the stage-2 paths."""
    rows = []
    for qid, paths, seeds in zip(traces["question_id"], traces["stage2_paths"],
                                 traces["stage2_seed_entities"]):
        passages = {prop_passage[p] for path in paths for p in path_prop_ids(str(path))}
        rows.append(coverage_row(gold[qid], passages, len(seeds)))
    return mean_rows(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    args = parser.parse_args()
    paths = DatasetPaths(args.dataset)
    questions = read_parquet(paths.questions)
    gold = dict(zip(questions["question_id"], questions["gold_passage_ids"]))
    props = read_parquet(paths.index_file("propositions.parquet"))
    out = {"hipporag2": hipporag2_coverage(read_parquet(paths.trace("hipporag2")), gold,
                                           fact_passages(read_parquet(paths.index_file("triples.parquet")),
                                                         read_parquet(paths.corpus, ["passage_id"])["passage_id"].tolist())),
           "proprag": proprag_coverage(read_parquet(paths.trace("proprag")), gold,
                                       dict(zip(props["prop_id"], props["passage_id"])))}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
