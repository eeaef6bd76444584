"""IRCoT, Self-Ask, S2G-RAG and GeAR on a tiny corpus with the real MiniLM embedder and a
scripted LLM: each method's stopping rules (answer reached, step limit, no progress, LLM
failure), its repair of malformed model output, and its evidence ordering."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import pandas as pd
import polars as pl
import pytest

from evichain.config import EmbedParams, LLMParams
from evichain.embed import get_embedder
from evichain.llm import LLMClient
from evichain.llm.scripted import set_responder
from evichain.methods.evireform.extract import split_sentences
from evichain.methods.iterative.common import DenseSearcher, Episode, Outcome, Passages
from evichain.methods.iterative.gear import GeAR
from evichain.methods.iterative.gear_graph import EntityGraph
from evichain.methods.iterative.ircot import IRCoT
from evichain.methods.iterative.params import GeARParams, IRCoTParams, S2GRAGParams, SelfAskParams
from evichain.methods.iterative.s2g_rag import S2GRAG, clean_ids
from evichain.methods.iterative.self_ask import SelfAsk, round_robin
from tests.fixtures.lothair import QUESTION, sentence_index
from tests.fixtures.lothair import SEVEN_PASSAGES as PASSAGES

Responder = Callable[[str, Any], str]


# --------------------------------------------------------------------------- fixtures
def corpus() -> pd.DataFrame:
    return pd.DataFrame(PASSAGES, columns=["passage_id", "title", "text"])


def encode(texts: list[str]) -> Any:
    return get_embedder(EmbedParams()).encode(texts)


@lru_cache(maxsize=1)
def passages() -> Passages:
    return Passages.from_corpus(pl.from_pandas(corpus()))


@lru_cache(maxsize=1)
def searcher() -> DenseSearcher:
    return DenseSearcher(encode([f"{t}\n{x}" for _, t, x in PASSAGES]), encode)


@lru_cache(maxsize=1)
def index_tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """EviReform sentence index of the corpus: propositions, entities, incidence."""
    c = corpus()
    props, entities, incidence = sentence_index(c)
    return props, entities, incidence


@lru_cache(maxsize=1)
def graph() -> EntityGraph:
    props, entities, incidence = index_tables()
    ids = corpus()["passage_id"].tolist()
    ordered = EntityGraph.ordered(props, ids)
    return EntityGraph.build(ids, ordered, entities, incidence, encode(ordered["text"].tolist()))


def scripted(fn: Responder) -> LLMClient:
    """A client whose replies come from ``fn(system, data)`` (data = the first user message,
    parsed; repair turns see the same data)."""
    def respond(messages: list[dict[str, Any]], model: str) -> str:
        system = messages[0]["content"]
        user = next(m["content"] for m in messages if m["role"] == "user")
        return fn(system, json.loads(user))

    set_responder(respond)
    return LLMClient(LLMParams(model="scripted/iterative", backoff_base_s=0.0, max_retries=0))


def reader(system: str, data: Any) -> str | None:
    """The shared reader (Listing 4): the first evidence title."""
    if system.startswith("Answer the question using only"):
        evidence = data["evidence"]
        return json.dumps({"answer": evidence[0]["title"] if evidence else "unknown"})
    return None


def check_tables(out: Outcome) -> None:
    """Run ranks 1..n with decreasing scores; evidence positions 1..n; ids consistent."""
    ranks = [r[1] for r in out.run]
    scores = [r[3] for r in out.run]
    assert ranks == list(range(1, len(ranks) + 1)) and scores == sorted(scores, reverse=True)
    assert len({r[2] for r in out.run}) == len(out.run)
    assert [e["position"] for e in out.evidence] == list(range(1, len(out.evidence) + 1))
    assert out.trace["evidence_ids"] == [e["passage_id"] for e in out.evidence]
    assert set(out.trace["evidence_ids"]) <= set(out.trace["retrieved_ids"])
    assert out.trace["n_llm_calls"] > 0 and out.trace["prompt_tokens"] > 0


# --------------------------------------------------------------------------- IRCoT
def ircot(params: IRCoTParams, fn: Responder) -> Outcome:
    return IRCoT(passages(), searcher(), params).run(scripted(fn), "q1", QUESTION)


def test_ircot_reasons_retrieves_and_stops_on_the_answer_phrase() -> None:
    def fn(system: str, data: Any) -> str:
        assert system.startswith("You are the one-sentence chain-of-thought generator in IRCoT")
        if not data["reasoning_so_far"]:
            return json.dumps({"reasoning_step": "Lothair II's mother was Ermengarde of Tours.",
                               "answer": None})
        assert any("20 March 851" in p["text"] for p in data["paragraphs"])
        return json.dumps({"reasoning_step": "Ermengarde of Tours died on 20 March 851. "
                                             "So the answer is: 20 March 851.", "answer": None})

    out = ircot(IRCoTParams(k=2), fn)
    t = out.trace
    assert t["stop_reason"] == "answered" and t["method_answer"] == "20 March 851"
    assert t["queries"] == [QUESTION, "Lothair II's mother was Ermengarde of Tours."]
    assert t["n_steps"] == 2 and t["n_llm_calls"] == 2
    assert json.loads(t["repairs"]) == {"answer_from_sentence": 1}
    assert "d1" in t["retrieved_ids"] and t["evidence_ids"] == t["retrieved_ids"]
    assert t["evidence_ids"][:2] == t["step_retrieved_ids"][0]       # question's paragraphs first
    assert out.evidence[0]["text"] == passages().texts[passages().ids.index(t["evidence_ids"][0])]
    check_tables(out)


def test_ircot_step_limit_final_round_and_paragraph_cap() -> None:
    flags: list[bool] = []

    def fn(system: str, data: Any) -> str:
        flags.append(data["final_round"])
        n = len(flags)
        name = ["Teutberga", "Erstein", "Tours"][n - 1]
        return json.dumps({"reasoning_step": f"Fact {n} concerns {name}. Another.", "answer": None})

    out = ircot(IRCoTParams(k=2, max_steps=3, max_paragraphs=3), fn)
    t = out.trace
    assert flags == [False, False, True]
    assert t["stop_reason"] == "step_limit" and t["method_answer"] is None
    assert len(t["evidence_ids"]) == 3 and len(t["reasoning"]) == 3
    assert t["reasoning"][0] == "Fact 1 concerns Teutberga."            # first sentence only
    assert json.loads(t["repairs"]) == {"extra_sentences_dropped": 3, "final_round_without_answer": 1}
    check_tables(out)


def test_ircot_repeated_sentence_without_new_paragraphs_stops() -> None:
    out = ircot(IRCoTParams(k=7), lambda s, d: json.dumps(
        {"reasoning_step": "Lothair II was a king.", "answer": ""}))
    t = out.trace
    assert t["stop_reason"] == "no_progress" and t["n_steps"] == 2
    assert t["reasoning"] == ["Lothair II was a king."]
    assert json.loads(t["repairs"]) == {"repeated_sentence": 1}


def test_ircot_malformed_output_is_a_recorded_failure_keeping_evidence() -> None:
    out = ircot(IRCoTParams(k=2), lambda s, d: "the answer is 851, I think")
    t = out.trace
    assert t["stop_reason"] == "llm_failure" and t["status"] == "failed"
    assert t["error_kind"] == "invalid_json" and t["error"].startswith("reason:")
    assert len(t["evidence_ids"]) == 2 and len(out.run) == 2


# --------------------------------------------------------------------------- Self-Ask
def self_ask(params: SelfAskParams, fn: Responder) -> Outcome:
    def full(system: str, data: Any) -> str:
        return reader(system, data) or fn(system, data)

    return SelfAsk(passages(), searcher(), params).run(scripted(full), "q1", QUESTION)


def test_self_ask_follow_ups_until_the_final_answer() -> None:
    def fn(system: str, data: Any) -> str:
        steps = data["steps"]
        if not steps:
            return json.dumps({"follow_up_needed": True, "follow_up": "Who was the mother of Lothair II?",
                               "final_answer": None})
        if len(steps) == 1:
            assert steps[0]["intermediate_answer"]
            return json.dumps({"follow_up_needed": True, "follow_up": "When did Ermengarde of Tours die?",
                               "final_answer": None})
        return json.dumps({"follow_up_needed": False, "follow_up": None, "final_answer": "20 March 851"})

    out = self_ask(SelfAskParams(k=3), fn)
    t = out.trace
    assert t["stop_reason"] == "answered" and t["method_answer"] == "20 March 851"
    assert t["follow_ups"] == ["Who was the mother of Lothair II?", "When did Ermengarde of Tours die?"]
    assert t["queries"] == t["follow_ups"] and t["n_steps"] == 2
    assert t["n_llm_calls"] == 5                                         # 3 asks + 2 intermediate answers
    hop1, hop2 = ([passages().ids.index(p) for p in ids] for ids in t["step_retrieved_ids"])
    assert t["evidence_ids"] == [passages().ids[r] for r in round_robin([hop1, hop2])]
    assert t["evidence_ids"][1] == passages().ids[hop2[0]] or hop2[0] in hop1
    assert "d1" in t["evidence_ids"]
    check_tables(out)


def test_self_ask_step_limit() -> None:
    def fn(system: str, data: Any) -> str:
        n = len(data["steps"])
        return json.dumps({"follow_up_needed": True, "follow_up": f"Where is {PASSAGES[n][1]}?",
                           "final_answer": None})

    t = self_ask(SelfAskParams(k=2, max_follow_ups=2), fn).trace
    assert t["stop_reason"] == "step_limit" and t["n_steps"] == 2 and t["n_llm_calls"] == 4


@pytest.mark.parametrize("reply, stop, repairs", [
    ({"follow_up_needed": True, "follow_up": "", "final_answer": "851"}, "answered",
     {"flag_without_follow_up": 1}),
    ({"follow_up_needed": False, "follow_up": None, "final_answer": None}, "no_progress",
     {"empty_step": 1}),
    ({"follow_up_needed": False, "follow_up": "Who was Lothair I?", "final_answer": "x"}, "no_progress",
     {"follow_up_without_flag": 2, "follow_up_and_final_answer": 2, "repeated_follow_up": 1}),
])
def test_self_ask_inconsistent_replies(reply: dict[str, Any], stop: str, repairs: dict[str, int]) -> None:
    t = self_ask(SelfAskParams(k=2), lambda s, d: json.dumps(reply)).trace
    assert t["stop_reason"] == stop and json.loads(t["repairs"]) == repairs


def test_self_ask_failed_intermediate_answer_keeps_its_passages() -> None:
    def fn(system: str, data: Any) -> str:
        if system.startswith("Answer the question using only"):
            return "{not json"
        return json.dumps({"follow_up_needed": True, "follow_up": "Who was Lothair I?", "final_answer": None})

    out = SelfAsk(passages(), searcher(), SelfAskParams(k=2)).run(scripted(fn), "q1", QUESTION)
    t = out.trace
    assert t["stop_reason"] == "llm_failure" and t["error"].startswith("intermediate_answer:")
    assert len(t["evidence_ids"]) == 2 and t["follow_ups"] == []


# --------------------------------------------------------------------------- S2G-RAG
def s2g(params: S2GRAGParams, fn: Responder) -> Outcome:
    return S2GRAG(passages(), searcher(), params).run(scripted(fn), "q1", QUESTION)


def context_text(data: Any) -> str:
    return " ".join(d["text"] for d in data["CONTEXT"])


def test_s2g_gap_directed_turns_until_sufficient() -> None:
    seen_missing: list[Any] = []

    def fn(system: str, data: Any) -> str:
        if system.startswith("You are a sentence-level evidence selector"):
            seen_missing.append(data["MISSING FACTS"])
            ids = [s["id"] for s in data["SENTENCES"]
                   if "son of" in s["text"] or "20 March 851" in s["text"]]
            return json.dumps({"evidence_global_ids": ids})
        assert system.startswith("You are a QA/RAG sufficiency judge")
        if "851" in context_text(data):
            return json.dumps({"sufficient": True, "gap_items": []})
        return json.dumps({"sufficient": False, "gap_items": [
            {"category": "bridge_entity", "target": "Ermengarde of Tours", "slot": "death date",
             "description": "when the mother died"}]})

    out = s2g(S2GRAGParams(k=1), fn)
    t = out.trace
    assert t["stop_reason"] == "answered" and t["n_steps"] == 2
    assert t["queries"] == [QUESTION, "Ermengarde of Tours death date"]
    assert seen_missing[0] == [] and seen_missing[1][0]["target"] == "Ermengarde of Tours"
    assert t["evidence_ids"] == ["d0", "d1"]
    assert out.evidence[0]["text"] == "He was the son of Emperor Lothair I and Ermengarde of Tours."
    assert "20 March 851" in out.evidence[1]["text"]      # the splitter keeps "Lothair I. She" whole
    assert t["n_selected_sentences"] == 2 and json.loads(t["gap_items"][0])[0]["slot"] == "death date"
    check_tables(out)


def test_s2g_step_limit_and_seen_documents_excluded() -> None:
    def fn(system: str, data: Any) -> str:
        if system.startswith("You are a sentence-level"):
            return json.dumps({"evidence_global_ids": [1]})
        return json.dumps({"sufficient": False, "gap_items": [
            {"category": "attribute", "target": "Lothair II", "slot": "mother", "description": ""}]})

    t = s2g(S2GRAGParams(k=2, max_turns=3), fn).trace
    assert t["stop_reason"] == "step_limit" and t["n_steps"] == 3
    assert t["n_llm_calls"] == 5                                        # 3 selections + 2 judgements
    flat = [p for step in t["step_retrieved_ids"] for p in step]
    assert len(flat) == len(set(flat)) == 6                             # exclude_seen: new docs only
    assert len(t["evidence_ids"]) == 3


def test_s2g_repairs_malformed_ids_categories_and_missing_gaps() -> None:
    judgements = iter([
        {"sufficient": False, "gap_items": [{"category": "weird", "target": "Ermengarde", "slot": "",
                                             "description": ""}, {"category": "other"}]},
        {"sufficient": False, "gap_items": []},
        {"sufficient": True, "gap_items": [{"category": "other", "target": "x"}]},
    ])
    picked: list[int] = []

    def fn(system: str, data: Any) -> str:
        if system.startswith("You are a sentence-level"):
            assert data["K"] == 1
            n = len(data["SENTENCES"])
            picked.append(n)
            return json.dumps({"evidence_global_ids": [0, n + 5, n, n]})
        return json.dumps(next(judgements))

    out = s2g(S2GRAGParams(k=1, max_sentences=1), fn)
    t = out.trace
    assert t["stop_reason"] == "answered"
    assert t["queries"] == [QUESTION, "Ermengarde", QUESTION]           # no gap → the question
    assert json.loads(t["repairs"]) == {
        "unknown_sentence_ids": 6, "duplicate_sentence_ids": 3,
        "unknown_gap_category": 1, "empty_gap_item": 1, "no_gap_items": 1, "gaps_when_sufficient": 1}
    assert t["n_selected_sentences"] == 3 and len(t["evidence_ids"]) == 3   # the last sentence of each
    for row, n in zip(out.evidence, picked):
        pid = row["passage_id"]
        assert row["text"] == split_sentences(passages().texts[passages().ids.index(pid)])[n - 1]


def test_s2g_clean_ids_counts_each_defect() -> None:
    ep = Episode("q", QUESTION, client=None)  # type: ignore[arg-type]
    assert clean_ids([0, 3, 2, 2, 1, 5, 4], n=4, k=2, ep=ep) == [3, 2]
    assert dict(ep.repairs) == {"unknown_sentence_ids": 2, "duplicate_sentence_ids": 1,
                                "sentences_over_k": 2}


def test_s2g_stops_without_new_sentences_and_on_failure() -> None:
    def fn(system: str, data: Any) -> str:
        if system.startswith("You are a sentence-level"):
            return json.dumps({"evidence_global_ids": []})
        return json.dumps({"sufficient": False, "gap_items": [{"target": "Tours"}]})

    t = s2g(S2GRAGParams(k=7, max_turns=4), fn).trace
    assert t["stop_reason"] == "no_progress" and t["n_steps"] == 2 and t["evidence_ids"] == []
    failed = s2g(S2GRAGParams(k=2), lambda s, d: '{"sufficient": "maybe"}').trace
    assert failed["stop_reason"] == "llm_failure" and failed["error_kind"] == "invalid_schema"
    assert len(failed["retrieved_ids"]) == 2


# --------------------------------------------------------------------------- GeAR
def gear(params: GeARParams, fn: Responder) -> Outcome:
    return GeAR(passages(), searcher(), graph(), encode, params).run(scripted(fn), "q1", QUESTION)


def test_gear_expands_over_shared_entities_and_puts_memory_passages_first() -> None:
    def fn(system: str, data: Any) -> str:
        if system.startswith("Read the retrieved passages"):
            return json.dumps({"proximal_triples": [["Lothair II", "son of", "Ermengarde of Tours"]]})
        if system.startswith("Update a compact memory"):
            memory = data["memory"] or [["Lothair II", "mother", "Ermengarde of Tours"]]
            texts = " ".join(p["text"] for p in data["passages"])
            if "20 March 851" in texts:
                memory = [["Ermengarde of Tours", "died on", "20 March 851"], *memory]
            return json.dumps({"gist_triples": memory})
        assert system.startswith("Judge whether the current knowledge memory")
        done = any("died on" in t for t in data["memory"])
        return json.dumps({"answerable": done, "next_query": None if done else "Ermengarde of Tours death"})

    out = gear(GeARParams(k=1, hops=1), fn)
    t = out.trace
    assert t["stop_reason"] == "answered" and t["n_steps"] == 1
    assert t["step_retrieved_ids"] == [["d0"]] and "d1" in t["expanded_ids"][0]
    assert t["memory"][0] == "Ermengarde of Tours | died on | 20 March 851"
    assert t["evidence_ids"][0] == "d1" and t["retrieved_ids"][0] == "d0"   # memory-first merge
    assert [r[2] for r in out.run] == t["evidence_ids"]                      # run_order: evidence
    check_tables(out)
    later = gear(GeARParams(k=1, hops=1, run_order="first_retrieval"), fn)
    assert [r[2] for r in later.run] == later.trace["retrieved_ids"]


def test_gear_step_limit_malformed_triples_and_query_rules() -> None:
    queries = iter(["Ermengarde of Tours", "Erstein", "Tours"])

    def fn(system: str, data: Any) -> str:
        if system.startswith("Read the retrieved passages"):
            return json.dumps({"proximal_triples": [["a", "b"], ["Lothair II", "king of", "Lotharingia"],
                                                     ["lothair ii", "King of", "Lotharingia"], ["", "x", "y"]]})
        if system.startswith("Update a compact memory"):
            new = [[p["title"], "is", "retrieved"] for p in data["passages"]]
            return json.dumps({"gist_triples": [["Lothair II", "king of", "Lotharingia"]] * 2 + new})
        return json.dumps({"answerable": False, "next_query": next(queries)})

    t = gear(GeARParams(k=1, hops=0, max_steps=3), fn).trace
    assert t["stop_reason"] == "step_limit" and t["n_steps"] == 3
    assert t["queries"] == [QUESTION, "Ermengarde of Tours", "Erstein"]
    assert t["n_llm_calls"] == 3 + 3 + 2 and t["memory"][0] == "Lothair II | king of | Lotharingia"
    r = json.loads(t["repairs"])
    assert r["malformed_proximal_triple"] == 6 and r["duplicate_proximal_triple"] == 3
    assert r["duplicate_memory_triple"] == 3


def test_gear_repeated_query_stops_without_progress() -> None:
    repeated = gear(GeARParams(k=1), lambda s, d: json.dumps(
        {"proximal_triples": []} if s.startswith("Read") else {"gist_triples": []}
        if s.startswith("Update") else {"answerable": False, "next_query": QUESTION.upper()})).trace
    assert repeated["stop_reason"] == "no_progress" and repeated["n_steps"] == 1
    assert json.loads(repeated["repairs"]) == {"no_proximal_triples": 1, "repeated_query": 1}


def test_gear_failed_memory_update_keeps_the_retrieved_passages() -> None:
    def fn(system: str, data: Any) -> str:
        if system.startswith("Read the retrieved passages"):
            return json.dumps({"proximal_triples": [["Lothair II", "son of", "Ermengarde of Tours"]]})
        return json.dumps({"gist_triples": "not a list"})

    out = gear(GeARParams(k=1, hops=1), fn)
    t = out.trace
    assert t["stop_reason"] == "llm_failure" and t["error"].startswith("memory:")
    assert t["evidence_ids"] == t["retrieved_ids"] and "d1" in t["evidence_ids"]
