"""The GraphRAG-Bench judge with a scripted LLM: statement classification, verdict repairs,
coverage, faithfulness, and malformed judge output recorded as a status row."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evichain.config import LLMParams
from evichain.llm import LLMCache, LLMClient
from evichain.llm.scripted import set_responder
from evichain.qa.medical_judge import (
    JudgeSettings, clean_statements, judge_answer, resolve_verdicts,
)

Handler = Callable[[dict[str, Any]], Any]


def scripted(handlers: dict[str, Handler], log: list[str] | None = None) -> None:
    """Route each call to the handler whose key starts the system prompt; a str result is sent
    raw (malformed output), anything else as JSON."""
    def respond(messages: list[dict[str, Any]], model: str) -> str:
        system = messages[0]["content"]
        for prefix, handler in handlers.items():
            if system.startswith(prefix):
                if log is not None:
                    log.append(prefix)
                out = handler(json.loads(messages[1]["content"]))
                return out if isinstance(out, str) else json.dumps(out)
        raise AssertionError(f"unscripted prompt {system[:50]!r}")
    set_responder(respond)


def _client(tmp_path: Path) -> LLMClient:
    return LLMClient(LLMParams(model="scripted/judge", max_retries=0), cache=LLMCache(tmp_path / "c.sqlite"))


def _split(payload: dict[str, Any]) -> list[str]:
    text = payload.get("text") or payload.get("reference_answer")
    return [s.strip() + "." for s in text.split(".") if s.strip()]


STATEMENTS = {"You split a text": lambda p: {"statements": _split(p)}}
FACTS = {"You list the facts": lambda p: {"facts": _split(p)}}


def _overlap_correctness(p: dict[str, Any]) -> dict[str, Any]:
    gt = {s["text"] for s in p["ground_truth_statements"]}
    ans = {s["text"] for s in p["answer_statements"]}
    return {"answer_statements": [{"id": s["id"], "reason": "r", "supported": s["text"] in gt}
                                  for s in p["answer_statements"]],
            "reference_statements": [{"id": s["id"], "reason": "r", "present": s["text"] in ans}
                                     for s in p["ground_truth_statements"]]}


def test_correctness_counts_tp_fp_fn(tmp_path: Path) -> None:
    scripted({**STATEMENTS, "You compare an answer": _overlap_correctness})
    row = judge_answer(_client(tmp_path), "Fact Retrieval", "q?", reference="A is B. C is D. E is F.",
                       answer="A is B. X is Y.", contexts=[], s=JudgeSettings())
    assert (row["tp"], row["fp"], row["fn"]) == (1, 1, 2)
    assert row["statement_f"] == pytest.approx(0.4)  # P = 1/2, R = 1/3
    assert row["status"] == "ok" and row["judge_calls"] == 3 and row["parse_repairs"] == 0
    assert row["answer_statements"] == ["A is B.", "X is Y."]
    # LCS("a is b x is y", "a is b c is d e is f") = "a is b is": P = 4/6, R = 4/9
    assert row["rouge_l"] == pytest.approx(2 * (4 / 6) * (4 / 9) / (4 / 6 + 4 / 9))
    assert "coverage" not in row and "faithfulness" not in row
    assert row["judge_prompt_tokens"] > 0 and row["judge_completion_tokens"] > 0


def test_unknown_duplicate_and_missing_ids_are_repaired_and_counted(tmp_path: Path) -> None:
    verdicts = {"answer_statements": [{"id": 1, "reason": "r", "supported": True},
                                      {"id": 1, "reason": "dup", "supported": False},
                                      {"id": 9, "reason": "unknown", "supported": True}],
                "reference_statements": [{"id": 2, "reason": "r", "present": True}]}
    scripted({**STATEMENTS, "You compare an answer": lambda p: verdicts})
    row = judge_answer(_client(tmp_path), "Complex Reasoning", "q?", reference="A. B. C.",
                       answer="A. Z.", contexts=[], s=JudgeSettings())
    # answer: id 1 supported (first verdict kept), id 2 missing -> not supported
    # reference: id 2 present, ids 1 and 3 missing -> absent
    assert (row["tp"], row["fp"], row["fn"]) == (1, 1, 2)
    assert row["parse_repairs"] == 5 and row["status"] == "ok"
    assert row["repair_notes"] == "duplicate_ids=1,missing_ids=3,unknown_ids=1"


def test_resolve_verdicts_and_clean_statements() -> None:
    values, repairs = resolve_verdicts([(2, True), (0, True), (2, False)], 3)
    assert values == [False, True, False]
    assert dict(repairs) == {"unknown_ids": 1, "duplicate_ids": 1, "missing_ids": 2}
    kept, repairs = clean_statements(["a  b", " ", "a b", "c"])
    assert kept == ["a b", "c"] and dict(repairs) == {"blank_statements": 1, "duplicate_statements": 1}


def test_malformed_judge_output_is_a_status_row(tmp_path: Path) -> None:
    scripted({**STATEMENTS, "You compare an answer": lambda p: "TP: 1, FP: 0 (no JSON here)"})
    row = judge_answer(_client(tmp_path), "Fact Retrieval", "q?", reference="A is B.",
                       answer="A is B.", contexts=[], s=JudgeSettings())
    assert row["status"] == "judge_failed" and row["error_kind"] == "invalid_json"
    assert "medical-judge-correctness" in row["error"] and row["judge_failed_calls"] == 1
    assert math.isnan(row["statement_f"])
    assert row["rouge_l"] == 1.0  # computed metrics survive a failed judge call


def test_verdicts_without_any_valid_id_fail_after_one_repair(tmp_path: Path) -> None:
    log: list[str] = []
    bad = {"answer_statements": [{"id": 7, "reason": "r", "supported": True}],
           "reference_statements": [{"id": 8, "reason": "r", "present": True}]}
    scripted({**STATEMENTS, "You compare an answer": lambda p: bad}, log)
    row = judge_answer(_client(tmp_path), "Fact Retrieval", "q?", reference="A.", answer="A.",
                       contexts=[], s=JudgeSettings())
    assert log.count("You compare an answer") == 2  # the call and its one repair turn
    assert row["status"] == "judge_failed" and row["error_kind"] == "invalid_schema"
    assert "no verdict names a valid id" in row["error"]


def test_empty_statement_list_for_a_real_answer_fails(tmp_path: Path) -> None:
    scripted({"You split a text": lambda p: {"statements": ["  "]}})
    row = judge_answer(_client(tmp_path), "Fact Retrieval", "q?", reference="A.", answer="A.",
                       contexts=[], s=JudgeSettings())
    assert row["status"] == "judge_failed" and "no statements" in row["error"]
    assert math.isnan(row["statement_f"])


def test_creative_generation_coverage_and_faithfulness(tmp_path: Path) -> None:
    def coverage(p: dict[str, Any]) -> dict[str, Any]:
        return {"verdicts": [{"id": f["id"], "covered": f["text"] in p["response"]} for f in p["facts"]]}

    def faithful(p: dict[str, Any]) -> dict[str, Any]:
        return {"verdicts": [{"id": s["id"], "reason": "r", "supported": s["text"] in p["context"]}
                             for s in p["statements"]]}

    scripted({**STATEMENTS, **FACTS, "You compare an answer": _overlap_correctness,
              "You check whether a response covers": coverage,
              "You judge whether statements are faithful": faithful})
    row = judge_answer(_client(tmp_path), "Creative Generation", "Write a note.",
                       reference="Sun exposure raises risk. Fair skin raises risk. Surgery is first-line.",
                       answer="Sun exposure raises risk. Surgery is first-line. Aspirin cures it.",
                       contexts=["Sun exposure raises risk.", "Surgery is first-line."],
                       s=JudgeSettings())
    assert row["status"] == "ok" and row["judge_calls"] == 6
    assert row["facts"] == ["Sun exposure raises risk.", "Fair skin raises risk.", "Surgery is first-line."]
    assert row["facts_covered"] == 2 and row["coverage"] == pytest.approx(2 / 3)
    assert row["faithful_statements"] == 2 and row["faithfulness"] == pytest.approx(2 / 3)
    assert row["statement_f"] == pytest.approx(2 / 3)  # TP 2, FP 1, FN 1
    assert "rouge_l" not in row


def test_faithfulness_without_context_is_zero(tmp_path: Path) -> None:
    scripted({**STATEMENTS, **FACTS, "You compare an answer": _overlap_correctness,
              "You check whether a response covers": lambda p: {"verdicts": [{"id": 1, "covered": True}]}})
    row = judge_answer(_client(tmp_path), "Creative Generation", "q?", reference="A.", answer="A.",
                       contexts=[""], s=JudgeSettings())
    assert row["faithfulness"] == 0.0 and row["coverage"] == 1.0
