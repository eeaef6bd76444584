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

from stages._common import check_failure_rate, run_stage

app = typer.Typer(add_completion=False)


@app.command()
def main(dataset: str = typer.Option(...), method: str = typer.Option(...),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.io import write_json, write_parquet
        from evichain.paths import DatasetPaths, ReportPaths
        from evichain.qa.medical_eval import summarize
        from flows.common import with_runner
        from flows.medical import evaluate_medical_flow

        params = load_params(params_file)
        medical = params.medical_qa
        paths = DatasetPaths(dataset)
        judge = medical.judge_llm(params.llm)
        stage = f"evaluate_medical@{dataset}-{method}"
        name = f"medqa-{method}"
        per_q, usage = with_runner(evaluate_medical_flow, params.orchestration)(
            paths.questions, paths.qa(name), paths.corpus, judge, medical, params.embed, stage)
        write_parquet(per_q, paths.per_question(name))
        summary = summarize(per_q, dataset=dataset, method=method, judge_model=judge.model,
                            reader_model=medical.answer_llm(params.llm).model,
                            similarity_model=params.embed.model, weights=medical.correctness_weights)
        write_json(summary, ReportPaths().metrics(dataset, name))
        write_json({"stage": stage, "judge_model": judge.model, "llm_usage": usage.as_dict(),
                    "questions": summary["questions"], "judge_failed": summary["judge_failed"]},
                   paths.usage(f"evaluate_medical-{method}"))
        judged = summary["questions"] - summary["answer_failed"]
        check_failure_rate(summary["judge_failed"], judged, medical.max_failure_rate,
                           key="medical_qa.max_failure_rate", what="judgements",
                           see=paths.per_question(name))
        return {"dataset": dataset, "method": method, "questions": summary["questions"],
                "ACC": summary["ACC"], "judge_model": judge.model}

    run_stage(f"evaluate_medical@{dataset}-{method}", body)


if __name__ == "__main__":
    app()
