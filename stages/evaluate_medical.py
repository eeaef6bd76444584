"""DVC stage ``evaluate_medical@<dataset>-<method>``: GraphRAG-Bench Medical judge + metrics.

Reads the answers (``qa/medqa-<method>.parquet``), judges each one with the benchmark's
metrics for its question type (:mod:`evichain.qa.medical_metrics`) and writes
``reports/eval/<ds>/medqa-<method>.parquet`` (per question: metrics, statement counts,
statements and facts, parse repairs, judge and reader tokens, status),
``reports/metrics/<ds>/medqa-<method>.json`` (per-type metrics and counts, ACC, judge /
reader / similarity models, tokens) and ``artifacts/<ds>/usage/evaluate_medical-<method>.json``
(``llm_usage`` of the judge client). The stage fails only if more than
``medical_qa.max_failure_rate`` of the judged questions had a failed judge call.
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import check_failure_rate
from stages._medical import MedicalStage, run_medical_stage

app = typer.Typer(add_completion=False)


def evaluate(run: MedicalStage) -> dict[str, object]:
    """Judge every answer; write per-question results, metrics and the usage summary."""
    from evichain.io import write_json, write_parquet
    from evichain.paths import ReportPaths
    from evichain.qa.medical_eval import summarize
    from flows.medical import evaluate_medical_flow

    medical, paths, method, params = run.medical, run.paths, run.method, run.params
    judge = medical.judge_llm(params.llm)
    name = f"medqa-{method}"
    per_q, usage = run.flow(evaluate_medical_flow, paths.questions, paths.qa(name), paths.corpus,
                            judge, medical, params.embed, run.stage)
    write_parquet(per_q, paths.per_question(name))
    summary = summarize(per_q, dataset=run.dataset, method=method, judge_model=judge.model,
                        reader_model=medical.answer_llm(params.llm).model,
                        similarity_model=params.embed.model, weights=medical.correctness_weights)
    write_json(summary, ReportPaths().metrics(run.dataset, name))
    write_json({"stage": run.stage, "judge_model": judge.model, "llm_usage": usage.as_dict(),
                "questions": summary["questions"], "judge_failed": summary["judge_failed"]},
               paths.usage(f"evaluate_medical-{method}"))
    judged = summary["questions"] - summary["answer_failed"]
    check_failure_rate(summary["judge_failed"], judged, medical.max_failure_rate,
                       key="medical_qa.max_failure_rate", what="judgements",
                       see=paths.per_question(name))
    return {"dataset": run.dataset, "method": method, "questions": summary["questions"],
            "ACC": summary["ACC"], "judge_model": judge.model}


@app.command()
def main(dataset: str = typer.Option(...), method: str = typer.Option(...),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    run_medical_stage("evaluate_medical", dataset, method, params_file, evaluate)


if __name__ == "__main__":
    app()
