"""``scripts/graph_seed_coverage.py``: gold passages behind HippoRAG 2's and PropRAG's seeds."""

from __future__ import annotations

import pandas as pd
import pytest

from scripts.graph_seed_coverage import (fact_passages, hipporag2_coverage, path_prop_ids,
                                         proprag_coverage)

GOLD = {"q1": ["A", "B"], "q2": ["C", "D"]}


def test_path_strings_give_their_proposition_ids() -> None:
    assert path_prop_ids("A#0 > B#3 > C#1 (0.7561)") == ["A#0", "B#3", "C#1"]
    assert path_prop_ids("A#0 (0.5)") == ["A#0"]


def test_kept_facts_map_to_their_source_passages() -> None:
    triples = pd.DataFrame({"subject": ["Ann", "Ann", "Bo"], "predicate": ["Ann met Bo.", "Ann met Bo.", "x"],
                            "object": ["Bo", "Bo", "y"], "passage_id": ["A", "E", "C"]})
    facts = fact_passages(triples, ["A", "C", "E"])
    assert facts[("ann", "ann met bo", "bo")] == {"A", "E"}
    traces = pd.DataFrame({"question_id": ["q1", "q2"],
                           "kept_facts": [[["ann", "ann met bo", "bo"]], []],
                           "n_seed_entities": [2, 0]})
    out = hipporag2_coverage(traces, GOLD, facts)
    # q1: passages {A, E}, half of its gold; q2 kept nothing.
    assert out == {"passages": 1.0, "gold_pct": 25.0, "complete_pct": 0.0, "seeds": 1.0, "questions": 2}
    bad = traces.assign(kept_facts=[[["no", "such", "fact"]], []])
    with pytest.raises(SystemExit, match="q1: kept fact"):
        hipporag2_coverage(bad, GOLD, facts)


def test_beam_paths_map_to_their_passages() -> None:
    traces = pd.DataFrame({"question_id": ["q1", "q2"],
                           "stage2_paths": [["A#0 > B#0 (0.9)", "A#1 (0.5)"], ["E#0 (0.4)"]],
                           "stage2_seed_entities": [["ann", "bo", "cy"], ["dee"]]})
    prop_passage = {"A#0": "A", "A#1": "A", "B#0": "B", "E#0": "E"}
    out = proprag_coverage(traces, GOLD, prop_passage)
    assert out == {"passages": 1.5, "gold_pct": 50.0, "complete_pct": 50.0, "seeds": 2.0, "questions": 2}
