"""`evichain trace`'s library: one question's path through a method, from tiny run, trace,
question and corpus tables written in tmp_path (the columns each family's trace-writing code
stores)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from evichain.paths import DatasetPaths
from evichain.report.trace import (
    Passages,
    TraceError,
    format_trace,
    kind_of,
    locate_run,
    question_trace,
    trace_sections,
)

CORPUS = pd.DataFrame({"passage_id": ["pa", "pb", "pc", "pd"],
                       "title": ["Lothair II", "Ermengarde of Tours", "Lothair I", "Lake Geneva"],
                       "text": ["Lothair II was the son of Lothair I and Ermengarde of Tours.",
                                "Ermengarde of Tours died on 20 March 851.",
                                "Lothair I was emperor.", "Lake Geneva lies north of the Alps."]})
QUESTIONS = pd.DataFrame({"question_id": ["q1", "q2"],
                          "question": ["When did Lothair II's mother die?", "Which lake?"],
                          "answers": [["20 March 851"], ["Lake Geneva"]],
                          "gold_passage_ids": [["pa", "pb"], ["pd"]]})
PROPOSITIONS = pd.DataFrame({"prop_id": ["pa#0", "pb#0", "pc#0"], "passage_id": ["pa", "pb", "pc"],
                             "text": ["Lothair II's mother is Ermengarde of Tours.",
                                      "Ermengarde of Tours died on 20 March 851.",
                                      "Lothair I was emperor of the Franks."]})


def run_table(question_id: str, order: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"question_id": question_id, "rank": range(1, len(order) + 1),
                         "passage_id": order, "score": [1.0 / r for r in range(1, len(order) + 1)]})


EVIREFORM = {"question_id": "q1", "selection_status": "ok", "selection_fallback": False,
             "selected_ids": ["pa#0", "pc#0"], "selected_ranks": [1, 3],
             "observed_passage_ids": ["pa", "pc"], "reformulation_status": "ok",
             "residual_queries": ["Ermengarde of Tours death", "When did Ermengarde die?"],
             "residual_rounds": [1, 2], "retained_residual_prop_ids": ["pb#0"], "rounds_used": 2,
             "judge_status": "off", "judge_fallback": False, "candidate_ids": ["pa#0", "pb#0", "pc#0"],
             "c0_passage_ids": ["pa", "pc"], "n_gold": 2, "c0_gold": 1, "sel_prompt_tokens": 2103}
CEE = {"question_id": "q1", "probes": ["Lothair II mother", "Ermengarde of Tours died", "death date"],
       "probe_rounds": [1, 1, 2], "summaries": ["Mother is Ermengarde of Tours.", "She died in 851."],
       "pool_sizes": [3, 4], "pool_size": 4, "rounds_run": 2, "stop_reason": "no_new_probes",
       "llm_failures": [], "selected_ids": ["pb", "pa"], "gold_in_pool": 2, "n_gold": 2,
       "prompt_tokens": 617, "bridge_ids": ["pb"], "bridge_rounds": [1], "bridge_source_ids": ["pa"]}
ITERATIVE = {"question_id": "q1", "method": "self_ask", "stop_reason": "answered", "status": "ok",
             "error_kind": "", "error": "", "n_steps": 2, "n_llm_calls": 3,
             "queries": ["Who is Lothair II's mother?", "When did Ermengarde of Tours die?"],
             "step_retrieved_ids": [["pa", "pc"], ["pb"]], "retrieved_ids": ["pa", "pc", "pb"],
             "evidence_ids": ["pa", "pb"], "n_repaired": 0, "repairs": "{}", "method_answer": "851",
             "follow_ups": ["Who is Lothair II's mother?", "When did Ermengarde of Tours die?"],
             "intermediate_answers": ["Ermengarde of Tours", "20 March 851"]}


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    """A dataset ``toy`` with runs and traces of evireform-full, cee-full, self_ask and bm25."""
    base = tmp_path / "artifacts"
    paths = DatasetPaths("toy", base)
    for table, path in ((CORPUS, paths.corpus), (QUESTIONS, paths.questions),
                        (PROPOSITIONS, paths.index_file("propositions.parquet"))):
        path.parent.mkdir(parents=True, exist_ok=True)
        table.to_parquet(path)
    (paths.dir / "runs").mkdir()
    (paths.dir / "traces").mkdir()
    for name, trace, order in (("evireform-full", EVIREFORM, ["pa", "pc", "pb", "pd"]),
                               ("cee-full", CEE, ["pb", "pa", "pc"]),
                               ("self_ask", ITERATIVE, ["pa", "pb", "pc"]),
                               ("bm25", {"question_id": "q1"}, ["pc", "pd", "pa", "pb"])):
        pd.concat([run_table("q1", order), run_table("q2", ["pd"])]).to_parquet(paths.run(name))
        other = {k: v for k, v in trace.items()} | {"question_id": "q2"}
        pd.DataFrame([trace, other]).to_parquet(paths.trace(name))
    return base


def traced(root: Path, run: str, question_id: str = "q1", k: int = 10) -> str:
    return format_trace(question_trace(locate_run(run, "toy", root), question_id, k))


def test_evireform_shows_selected_propositions_and_residual_queries_per_round(root: Path) -> None:
    out = traced(root, "evireform-full")
    assert out.splitlines()[:4] == ["evireform-full · question q1 (trace: evireform)",
                                    "Q: When did Lothair II's mother die?", "answers: 20 March 851",
                                    "gold: Lothair II [pa]; Ermengarde of Tours [pb]"]
    assert ("  #1 Lothair II's mother is Ermengarde of Tours. — Lothair II [pa] ✓" in out)
    assert "  #3 Lothair I was emperor of the Franks. — Lothair I [pc]" in out
    assert "#: rank among 3 candidates" in out
    assert "  round 1: Ermengarde of Tours death\n  round 2: When did Ermengarde die?" in out
    assert "Retained by the residual queries\n  Ermengarde of Tours died on 20 March 851. — " \
           "Ermengarde of Tours [pb] ✓" in out
    assert "sel_prompt_tokens=2103" in out and "c0_passage_ids: 2 items" in out   # nothing hidden
    assert "    1     1.0000  ✓  Lothair II [pa]" in out
    assert "    2     0.5000     Lothair I [pc]" in out
    assert out.endswith("Recall@10: 1.00 (2/2 gold in the top 10)")


def test_cee_shows_probes_summary_and_pool_per_round(root: Path) -> None:
    out = traced(root, "cee-full")
    assert ("Round 1, pool 3 passages\n  probe: Lothair II mother\n  probe: Ermengarde of Tours died\n"
            "  summary: Mother is Ermengarde of Tours.") in out
    assert "Round 2, pool 4 passages\n  probe: death date\n  summary: She died in 851." in out
    assert "Stopped: no_new_probes after 2 round(s); gold in pool 2/2" in out
    assert "  round 1: Ermengarde of Tours [pb] ✓ (from Lothair II [pa] ✓)" in out


def test_iterative_shows_each_step_its_query_and_retrieved_passages(root: Path) -> None:
    out = traced(root, "self_ask", k=1)
    assert ("Steps (2; stop: answered, status ok)\n  1. Who is Lothair II's mother?\n"
            "     retrieved: Lothair II [pa] ✓; Lothair I [pc]\n  2. When did Ermengarde of Tours die?\n"
            "     retrieved: Ermengarde of Tours [pb] ✓") in out
    assert "  2. When did Ermengarde of Tours die? → 20 March 851" in out
    assert "Evidence read\n  Lothair II [pa] ✓; Ermengarde of Tours [pb] ✓" in out
    assert "Answer: 851" in out
    assert "Top 1:" in out and out.endswith("Recall@1: 0.50 (1/2 gold in the top 1)")


def test_bm25_says_it_records_no_intermediate_steps(root: Path) -> None:
    out = traced(root, "bm25", "q2")
    assert "(trace: first_stage)" in out
    assert "bm25 records no intermediate steps" in out
    assert "    1     1.0000  ✓  Lake Geneva [pd]" in out
    assert out.endswith("Recall@10: 1.00 (1/1 gold in the top 10)")


def test_a_run_without_a_trace_table_shows_its_ranking_and_says_so(root: Path) -> None:
    paths = DatasetPaths("toy", root)
    run_table("q1", ["pb"]).to_parquet(paths.run("dense"))
    out = traced(root, "dense")
    assert f"note: no trace table at {paths.trace('dense')}: only the ranking is shown" in out
    assert "Recall@10: 0.50 (1/2 gold in the top 10)" in out


def _row(**columns: Any) -> dict[str, Any]:
    return {"question_id": "q1", **columns}


NAMES = Passages({"pa": "Lothair II", "pb": "Ermengarde of Tours"}, {"pa": "pa", "pb": "pb"}, {"pb"})


@pytest.mark.parametrize(("row", "kind", "expected"), [
    (_row(method="ircot", queries=["q", "Ermengarde died"], step_retrieved_ids=[["pa"], ["pb"]],
          reasoning=["Lothair II's mother is Ermengarde.", "So the answer is: 851."],
          evidence_ids=["pa", "pb"], method_answer="851"),
     "iterative", "Reasoning (IRCoT)\n  1. Lothair II's mother is Ermengarde.\n  2. So the answer is: 851."),
    (_row(method="s2g_rag", queries=["q"], step_retrieved_ids=[["pa"]], n_selected_sentences=2,
          gap_items=[json.dumps([{"category": "attribute", "target": "Ermengarde", "slot": "death date",
                                  "description": ""}])], evidence_ids=["pa"], method_answer=""),
     "iterative", "Gap items (S2G-RAG; 2 sentences selected)\n  after turn 1: Ermengarde death date"),
    (_row(method="gear", queries=["q"], step_retrieved_ids=[["pa"]],
          memory=["Lothair II | mother | Ermengarde"],
          expanded_ids=[["pb"]], evidence_ids=["pb"], method_answer="851"),
     "iterative", "Expanded passages per step (GeAR)\n  1. Ermengarde of Tours [pb] ✓"),
    (_row(status="ok", candidate_facts=[["Lothair II", "mother", "Ermengarde"], ["a", "b", "c"]],
          kept_facts=[["Lothair II", "mother", "Ermengarde"]], filter_status="ok",
          seed_entities=["Ermengarde", "Lothair II"], fallback=""),
     "graph", "Kept facts (1 of 2 linked; filter ok)\n  (Lothair II, mother, Ermengarde)\n"
              "Seed entities\n  Ermengarde, Lothair II"),
    (_row(stage1_paths=["pa#0 > pb#0 (0.6651)"], stage1_seed_entities=["Lothair II"],
          stage2_paths=["pa#0 > pb#0 (0.6651)"], stage2_seed_entities=["Ermengarde"], fallback=""),
     "graph", "Stage 2 paths\n  1. pa#0 > pb#0 (0.6651)"),
    (_row(method="hyde", status="ok", fallback=False, generated=["Ermengarde died in 851."],
          n_requested=1, n_generated=1, errors=[]),
     "expansion", "Generated (1 of 1; status ok)\n  1. Ermengarde died in 851."),
    (_row(pool_ids=["pa", "pb"], pool_size=2, n_gold=1, gold_in_pool=1, status="ok", fallback=False,
          reranked_ids=["pb", "pa"]),
     "rerank", "First-stage pool (2 passages, dense order; gold in pool 1/1; status ok)\n"
               "  1. Lothair II [pa]\n  2. Ermengarde of Tours [pb] ✓"),
    (_row(a_prompt_tokens=3, b_prompt_tokens=5),
     "unknown", "Trace fields (no known kind: printed as stored)\n  a_prompt_tokens: 3"),
])
def test_every_family_prints_what_its_trace_holds(row: dict[str, Any], kind: str, expected: str) -> None:
    name, sections = trace_sections(row, NAMES, "m")
    text = "\n".join(line for s in sections for line in (s.heading, *s.lines))
    assert name == kind
    assert expected in text


def test_kinds_are_told_apart_by_their_columns() -> None:
    assert kind_of(EVIREFORM).name == "evireform"          # type: ignore[union-attr]
    assert kind_of({**EVIREFORM, "coverage_pool": 20}).name == "evireform"  # type: ignore[union-attr]
    assert kind_of(CEE).name == "cee"                      # type: ignore[union-attr]
    assert kind_of(ITERATIVE).name == "iterative"          # type: ignore[union-attr]
    assert kind_of({"question_id": "q", "n_words": 4}) is None


def test_an_evichain_run_folder_is_read_in_the_users_ids(tmp_path: Path) -> None:
    out = tmp_path / "out"
    paths = DatasetPaths("user", out / "artifacts")
    paths.dir.mkdir(parents=True)
    CORPUS.to_parquet(paths.corpus)
    QUESTIONS.to_parquet(paths.questions)
    pd.DataFrame({"passage_id": ["pa", "pb", "pc", "pd"], "user_id": ["d1", "d2", "d3", "d4"]}
                 ).to_parquet(paths.dir / "id_map.parquet")
    run_table("q1", ["d2", "d3"]).to_parquet(out / "self_ask.parquet")
    pd.DataFrame([ITERATIVE]).to_parquet(out / "self_ask-trace.parquet")
    text = format_trace(question_trace(locate_run(str(out)), "q1"))
    assert "gold: Lothair II [d1]; Ermengarde of Tours [d2]" in text
    assert "     retrieved: Lothair II [d1] ✓; Lothair I [d3]" in text
    assert "    1     1.0000  ✓  Ermengarde of Tours [d2]" in text
    assert text.endswith("Recall@10: 0.50 (1/2 gold in the top 10)")
    run_table("q1", ["d1"]).to_parquet(out / "bm25.parquet")
    pd.DataFrame({"question_id": ["q1"]}).to_parquet(out / "bm25-trace.parquet")
    with pytest.raises(TraceError, match=r"holds 2 runs of evichain run; name one as .*/<label> "
                                         r"\(known: bm25, self_ask\)"):
        locate_run(str(out))
    bm25 = format_trace(question_trace(locate_run(str(out / "bm25")), "q1"))
    assert "records no intermediate steps" in bm25
    with pytest.raises(TraceError, match=r"no run 'dense' in .*out \(known: bm25, self_ask\)"):
        locate_run(str(out / "dense"))


def test_unknown_run_question_or_dataset_names_the_valid_choices(root: Path) -> None:
    with pytest.raises(TraceError, match=r"no run 'evireform-ful' of toy in .*runs \(known: bm25, "
                                         r"cee-full, evireform-full, self_ask\)"):
        locate_run("evireform-ful", "toy", root)
    with pytest.raises(TraceError, match=r"no dataset 'toyy' under .* \(known: toy\)"):
        locate_run("bm25", "toyy", root)
    with pytest.raises(TraceError, match=r"no question 'q3' in .*questions.parquet \(known: q1, q2\)"):
        question_trace(locate_run("bm25", "toy", root), "q3")


def test_many_choices_are_cut_to_the_closest(tmp_path: Path, root: Path) -> None:
    paths = DatasetPaths("toy", root)
    ids = [f"2hop__{n}_{n + 7}" for n in range(100)]
    pd.DataFrame({"question_id": ids, "question": "?", "answers": [[]] * 100,
                  "gold_passage_ids": [[]] * 100}).to_parquet(paths.questions)
    with pytest.raises(TraceError) as caught:
        question_trace(locate_run("bm25", "toy", root), "2hop__42_49x")
    message = str(caught.value)
    assert "closest: 2hop__42_49," in message and message.endswith("(of 100 question ids))")
