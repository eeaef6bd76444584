"""Expected scores (pyserini 2CR style): the pipeline still reproduces reproduce/expected_scores.yaml.

BM25 on a fixed 50-question sample of every benchmark with gold and dense on the demo must
match to 1e-6; EviReform and the reader on the demo are replayed from the recorded LLM cache
(no model needed) and must match exactly. The entries that encode a whole benchmark corpus
(EviReform on 2wiki_s, PropRAG, the LLM baselines) are left to ``python -m scripts.reproduce``:
minutes on 2 cores. ``--only`` (groups of entries) is checked without running a stage.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scripts import reproduce



def test_compare_uses_exact_match_for_replayed_and_bands_for_live_scores() -> None:
    exp = [reproduce.Entry("d", "bm25", "Recall@5", 0.5, 1e-6, False),
           reproduce.Entry("d", "evireform-full", "Recall@5", 0.5, 0.1, True)]
    same = [reproduce.Entry(e.dataset, e.method, e.metric, e.value, e.tolerance, e.replay) for e in exp]
    assert reproduce.compare(exp, same) == []
    moved = [reproduce.Entry("d", "bm25", "Recall@5", 0.5 + 2e-6, 1e-6, False),
             reproduce.Entry("d", "evireform-full", "Recall@5", 0.55, 0.1, True)]
    problems = reproduce.compare(exp, moved)
    assert len(problems) == 2 and "bm25 Recall@5" in problems[0] and "evireform-full" in problems[1]
    assert "not measured" in reproduce.compare(exp, same[:1])[0]


def _entry(dataset: str, method: str, value: float = 0.5) -> reproduce.Entry:
    return reproduce.Entry(dataset, method, "Recall@5", value, 0.1, True)


def test_only_selects_groups_and_compare_checks_just_their_entries() -> None:
    assert reproduce.parse_groups(["--add"]) == reproduce.GROUPS
    assert reproduce.parse_groups(["--only", "baselines,qa", "--add"]) == ("qa", "baselines")
    assert reproduce.parse_groups(["--only=proprag"]) == ("proprag",)
    for bad in (["--only", "nope"], ["--only"], ["--only", "--add"], ["--only="]):
        with pytest.raises(ValueError):
            reproduce.parse_groups(bad)
    groups = {m: reproduce.group_of(_entry("musique", m)) for m in
              ("bm25", "dense", "evireform-full", "evireform-fused", "proprag", "qa-proprag",
               "ircot", "gear", "hipporag2", "catrag", "rerank-listwise", "cee-no_coverage", "qa-cee-full")}
    assert groups == {"bm25": "deterministic", "dense": "deterministic",
                      "evireform-full": "evireform", "evireform-fused": "proprag",
                      "proprag": "proprag", "qa-proprag": "qa", "ircot": "baselines",
                      "gear": "baselines", "hipporag2": "baselines", "catrag": "baselines",
                      "rerank-listwise": "baselines", "cee-no_coverage": "cee", "qa-cee-full": "cee"}
    expected = [_entry("demo", "bm25"), _entry("musique", "catrag")]
    measured = [_entry("musique", "catrag")]  # --only baselines: bm25 not measured
    assert reproduce.compare(expected, measured, ("baselines",)) == []
    assert "bm25 Recall@5: not measured" in reproduce.compare(expected, measured)[0]
    moved = [_entry("musique", "catrag", 0.6)]
    assert len(reproduce.compare(expected, moved, ("baselines",))) == 1


def test_runs_narrows_the_checked_entries_to_the_named_runs_and_their_reader() -> None:
    assert reproduce.parse_runs(["--only", "baselines"]) is None
    assert reproduce.parse_runs(["--runs", "query2doc,hyde", "--add"]) == ("query2doc", "hyde")
    assert reproduce.parse_runs(["--runs=cee-robust"]) == ("cee-robust",)
    for bad in (["--runs"], ["--runs", "--add"], ["--runs="], ["--runs", "hyde", "--write"]):
        with pytest.raises(ValueError):
            reproduce.parse_runs(bad)
    reproduce.check_runs(("hyde", "cee-robust", "query2doc"))
    with pytest.raises(ValueError, match="hydee"):
        reproduce.check_runs(("hydee",))
    assert reproduce.wanted("qa-cee-robust", ("cee-robust",))
    assert not reproduce.wanted("cee-full", ("cee-robust",))
    assert reproduce.wanted("anything", None)
    expected = [_entry("musique", "catrag"), _entry("musique", "query2doc"),
                _entry("musique", "cee-robust"), _entry("musique", "qa-cee-robust")]
    # catrag is not measured, but outside --runs it is not checked either
    measured = [_entry("musique", "query2doc")]
    assert reproduce.compare(expected, measured, ("baselines",), ("query2doc",)) == []
    assert len(reproduce.compare(expected, measured, ("baselines",))) == 1
    assert [e.method for e in reproduce.select(expected, ("cee",), ("cee-robust",))] == [
        "cee-robust", "qa-cee-robust"]


def test_datasets_narrows_the_checked_entries_to_the_named_datasets() -> None:
    assert reproduce.parse_datasets(["--only", "evireform"]) is None
    assert reproduce.parse_datasets(["--datasets", "hotpotqa_s,musique"]) == ("hotpotqa_s", "musique")
    assert reproduce.parse_datasets(["--datasets=2wiki_s"]) == ("2wiki_s",)
    for bad in (["--datasets"], ["--datasets", "--add"], ["--datasets", "hotpot"], ["--datasets="],
                ["--datasets", "musique", "--write"]):
        with pytest.raises(ValueError):
            reproduce.parse_datasets(bad)
    expected = [_entry("musique", "evireform-full"), _entry("hotpotqa_s", "evireform-full")]
    measured = [_entry("hotpotqa_s", "evireform-full")]
    assert reproduce.compare(expected, measured, ("evireform",), None, ("hotpotqa_s",)) == []
    assert "musique" in reproduce.compare(expected, measured, ("evireform",))[0]
    assert reproduce.select(expected, ("evireform",), None, ("musique",)) == expected[:1]


def test_help_prints_the_usage_without_running_a_stage(capsys: pytest.CaptureFixture[str]) -> None:
    assert reproduce.main(["--help"]) == 0
    assert "--datasets" in capsys.readouterr().out


def test_stage_entry_points_called_in_process_get_their_option_defaults() -> None:
    """A stage ``main`` called as a function gets its Typer defaults, not OptionInfo objects
    (``stages.fuse`` with no ``record`` is the ``fuse`` stage, not ``fuse_seeds``)."""
    from stages import fuse

    kwargs = reproduce._with_option_defaults(fuse.main, {"dataset": "demo"})
    assert kwargs["record"] is None and kwargs["params_file"] == Path("params.yaml")
    assert reproduce._with_option_defaults(fuse.main, {"dataset": "d", "record": Path("r")})["record"] == Path("r")
    with pytest.raises(TypeError, match="dataset"):
        reproduce._with_option_defaults(fuse.main, {})


def test_add_and_write_keep_the_unselected_groups() -> None:
    recorded = [_entry("demo", "bm25"), _entry("musique", "catrag"), _entry("musique", "ircot")]
    measured = [_entry("musique", "catrag", 0.7), _entry("2wiki_s", "gear")]
    assert reproduce.added(recorded, measured) == [_entry("2wiki_s", "gear")]
    assert reproduce.rewritten(recorded, measured, ("baselines",)) == [
        _entry("demo", "bm25"), _entry("musique", "catrag", 0.7), _entry("2wiki_s", "gear")]


def test_baselines_are_large_and_replay_from_their_recordings() -> None:
    runs = [(ds, name) for ds, names in reproduce.BASELINE_RUNS.items() for name in names]
    assert all(reproduce.is_large(_entry(ds, name)) for ds, name in runs)
    assert ("musique", "gear") in runs and ("2wiki_s", "gear") in runs
    assert set(reproduce.BASELINE_RUNS) <= set(reproduce._group_datasets("baselines", True))
    assert reproduce._group_datasets("baselines", False) == ()
    assert all(reproduce.baseline_cache(ds, name).is_file() for ds, name in runs)
    assert reproduce.baseline_cache("musique", "hipporag2").name == "musique-catrag-llm-cache.sqlite"


def test_cee_is_large_and_replays_from_its_recording() -> None:
    runs = [(ds, name) for ds, names in reproduce.CEE_RUNS.items() for name in names]
    assert ("musique", "cee-full") in runs
    assert all(reproduce.is_large(_entry(ds, name)) for ds, name in runs)
    assert reproduce._group_datasets("cee", True) == tuple(reproduce.CEE_RUNS)
    assert reproduce._group_datasets("cee", False) == ()
    assert all(reproduce.cee_cache(ds).is_file() for ds in reproduce.CEE_RUNS)
    assert set(reproduce.CEE_READ) <= set(reproduce.CEE_RUNS)
    # the reader reads runs the group makes on those datasets
    assert all(set(reproduce.CEE_READERS) <= set(reproduce.CEE_RUNS[ds]) for ds in reproduce.CEE_READ)


@pytest.mark.parametrize("cut", [True, False])
def test_scratch_cuts_the_samples_except_for_whole_sample_groups(cut: bool) -> None:
    """CEE's facet index depends on every question of its sample: its group replays the
    reported samples whole, every other group their first SAMPLE_QUESTIONS questions."""
    reported = yaml.safe_load((reproduce.ROOT / "params.yaml").read_text(encoding="utf-8"))
    with reproduce._scratch(cut) as work:
        params = yaml.safe_load((work / "params.yaml").read_text(encoding="utf-8"))
    for name in ("2wiki_s", "hotpotqa_s"):
        n = params["data"]["samples"][name]["n_questions"]
        assert n == (reproduce.SAMPLE_QUESTIONS if cut
                     else reported["data"]["samples"][name]["n_questions"])
    assert "cee" in reproduce.WHOLE_SAMPLE_GROUPS


@pytest.mark.slow
def test_pipeline_reproduces_the_expected_scores() -> None:
    expected = reproduce.load_expected()
    assert {e.method for e in expected} >= {"bm25", "dense", "evireform-full", "qa-bm25"}
    small = [e for e in expected if not reproduce.is_large(e)]
    assert len(small) < len(expected)  # the large entries exist, checked by the script
    problems = reproduce.compare(small, reproduce.measure(large=False))
    assert problems == [], "\n".join(problems)
