"""read_medical and evaluate_medical stages end to end on a tiny Medical slice: scripted LLM,
real MiniLM embeddings, one question per type plus one whose answer call fails."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from evichain.data.schema import corpus_table, questions_table
from evichain.io import read_json, read_parquet, write_parquet
from evichain.llm.scripted import set_responder
from evichain.paths import DatasetPaths, ReportPaths

TEXTS = ["Basal cell carcinoma is the most common skin cancer.",
         "Fair skin and organ transplant are risk factors.",
         "Surgery is the first-line treatment of basal cell carcinoma."]
QUESTIONS = [
    ("q1", "What is the most common skin cancer?", "Basal cell carcinoma is the most common skin cancer.", "Fact Retrieval"),
    ("q2", "Why are transplant patients at risk?", "Fair skin and organ transplant are risk factors.", "Complex Reasoning"),
    ("q3", "Summarize BCC risk factors.", "Fair skin and organ transplant are risk factors. UV is a risk factor.", "Contextual Summarize"),
    ("q4", "Write a consult note on BCC.", "Surgery is the first-line treatment of basal cell carcinoma.", "Creative Generation"),
    ("q5", "FAIL this one.", "Anything.", "Fact Retrieval"),
]


def _sentences(text: str) -> list[str]:
    return [s.strip() + "." for s in text.split(".") if s.strip()]


def respond(messages: list[dict[str, Any]], model: str) -> str:
    """Answers with the first knowledge-base text (no JSON for q5); judges by exact overlap."""
    system, data = messages[0]["content"], json.loads(messages[1]["content"])
    if system.startswith("You are a helpful assistant"):
        if data["question"].startswith("FAIL"):
            return "not json"
        return json.dumps({"answer": data["knowledge_base"][0]})
    if system.startswith("You split a text"):
        return json.dumps({"statements": _sentences(data["text"])})
    if system.startswith("You list the facts"):
        return json.dumps({"facts": _sentences(data["reference_answer"])})
    if system.startswith("You compare an answer"):
        gt = {s["text"] for s in data["ground_truth_statements"]}
        ans = {s["text"] for s in data["answer_statements"]}
        return json.dumps({
            "answer_statements": [{"id": s["id"], "reason": "", "supported": s["text"] in gt}
                                  for s in data["answer_statements"]],
            "reference_statements": [{"id": s["id"], "reason": "", "present": s["text"] in ans}
                                     for s in data["ground_truth_statements"]]})
    if system.startswith("You check whether a response covers"):
        return json.dumps({"verdicts": [{"id": f["id"], "covered": f["text"] in data["response"]}
                                        for f in data["facts"]]})
    if system.startswith("You judge whether statements are faithful"):
        return json.dumps({"verdicts": [{"id": s["id"], "reason": "", "supported": s["text"] in data["context"]}
                                        for s in data["statements"]]})
    raise AssertionError(system[:40])


@pytest.fixture()
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import flows.read

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(flows.read, "_CLIENTS", {})  # stage clients hold the previous test's cache
    (tmp_path / "params.yaml").write_text(
        "llm: {model: scripted/medical, max_retries: 0}\n"
        "orchestration: {max_workers: 2}\n"
        "medical_qa: {datasets: [medical_s], methods: [bm25], context_k: 2, max_failure_rate: 0.5}\n")
    paths = DatasetPaths("medical_s")
    corpus = corpus_table([(f"Medical #{i:04d}", t) for i, t in enumerate(TEXTS)])
    questions = questions_table([{"question_id": q, "question": text, "answers": [a], "gold_passage_ids": [],
                                  "type": t, "n_hops": 0} for q, text, a, t in QUESTIONS])
    pid = dict(zip(corpus["text"], corpus["passage_id"]))
    first = {"q1": TEXTS[0], "q2": TEXTS[1], "q3": TEXTS[1], "q4": TEXTS[2], "q5": TEXTS[0]}
    run = pd.DataFrame([{"question_id": q, "rank": r + 1, "passage_id": pid[t], "score": 1.0 - r / 10}
                        for q, top in first.items()
                        for r, t in enumerate([top, *[x for x in TEXTS if x != top]])])
    write_parquet(corpus, paths.corpus)
    write_parquet(questions, paths.questions)
    write_parquet(run, paths.run("bm25"))
    set_responder(respond)
    return tmp_path


def test_read_and_evaluate_medical_stages(workdir: Path) -> None:
    from stages import evaluate_medical, read_medical

    read_medical.main(dataset="medical_s", method="bm25", params_file=Path("params.yaml"))
    paths = DatasetPaths("medical_s")
    answers = read_parquet(paths.qa("medqa-bm25")).set_index("question_id")
    assert answers.loc["q1", "prediction"] == TEXTS[0] and answers.loc["q1", "status"] == "ok"
    assert len(answers.loc["q1", "context_passage_ids"]) == 2  # context_k
    assert answers.loc["q5", "status"] == "failed" and answers.loc["q5", "error_kind"] == "invalid_json"
    usage = read_json(paths.usage("read_medical-bm25"))
    assert usage["failed"] == 1 and usage["llm_usage"]["failures"] == 1

    evaluate_medical.main(dataset="medical_s", method="bm25", params_file=Path("params.yaml"))
    per_q = read_parquet(paths.per_question("medqa-bm25")).set_index("question_id")
    assert per_q.loc["q5", "status"] == "answer_failed" and per_q.loc["q5", "correctness"] == 0.0
    assert per_q.loc["q5", "rouge_l"] == 0.0 and per_q.loc["q5", "judge_calls"] == 0
    q1 = per_q.loc["q1"]
    assert q1["status"] == "ok" and q1["statement_f"] == 1.0 and q1["rouge_l"] == 1.0
    assert q1["similarity"] == pytest.approx(1.0, abs=1e-5)
    assert q1["correctness"] == pytest.approx(1.0, abs=1e-5)
    q3 = per_q.loc["q3"]  # answer states one of the reference's two facts
    assert q3["coverage"] == pytest.approx(0.5) and q3["statement_f"] == pytest.approx(2 / 3)
    assert math.isnan(q3["rouge_l"]) and 0.5 < q3["similarity"] < 1.0
    assert q3["correctness"] == pytest.approx(0.75 * (2 / 3) + 0.25 * q3["similarity"])
    assert per_q.loc["q4", "faithfulness"] == 1.0 and per_q.loc["q4", "judge_calls"] == 6

    metrics = read_json(ReportPaths().metrics("medical_s", "medqa-bm25"))
    fr = metrics["per_type"]["Fact Retrieval"]
    assert fr["n"] == 2 and fr["n_answer_failed"] == 1
    assert fr["correctness"] == pytest.approx(0.5, abs=1e-5)  # (1 + 0) / 2
    expected_acc = (fr["correctness"] + metrics["per_type"]["Complex Reasoning"]["correctness"]
                    + q3["correctness"] + per_q.loc["q4", "correctness"]) / 4
    assert metrics["ACC"] == pytest.approx(expected_acc, abs=1e-6)
    assert metrics["judge_model"] == "scripted/medical" and metrics["answer_failed"] == 1
    assert metrics["judge_tokens"]["prompt"] == int(per_q["judge_prompt_tokens"].sum()) > 0
    assert "n_questions" not in metrics  # keeps the retrieval report from treating it as a run
    assert read_json(paths.usage("evaluate_medical-bm25"))["llm_usage"]["calls"] > 0

    first_bytes = ReportPaths().metrics("medical_s", "medqa-bm25").read_bytes()
    evaluate_medical.main(dataset="medical_s", method="bm25", params_file=Path("params.yaml"))
    assert ReportPaths().metrics("medical_s", "medqa-bm25").read_bytes() == first_bytes  # cache hits


def test_judge_failure_rate_fails_the_stage(workdir: Path) -> None:
    from stages import evaluate_medical, read_medical

    read_medical.main(dataset="medical_s", method="bm25", params_file=Path("params.yaml"))

    def broken_judge(messages: list[dict[str, Any]], model: str) -> str:
        if messages[0]["content"].startswith("You compare an answer"):
            return "{broken"
        return respond(messages, model)

    set_responder(broken_judge)
    with pytest.raises(SystemExit):
        evaluate_medical.main(dataset="medical_s", method="bm25", params_file=Path("params.yaml"))
    per_q = read_parquet(DatasetPaths("medical_s").per_question("medqa-bm25"))
    judged = per_q[per_q["status"] != "answer_failed"]
    assert (judged["status"] == "judge_failed").all() and (judged["error_kind"] == "invalid_json").all()
    assert judged["correctness"].isna().all()
