"""DVC stage ``read_medical@<dataset>-<method>``: GraphRAG-Bench Medical answers (Listing 2).

Each question is answered from the top ``medical_qa.context_k`` passages of the method's run
(``artifacts/<ds>/runs/<method>.parquet``). Writes ``artifacts/<ds>/qa/medqa-<method>.parquet``
(question_id, type, prediction, idk, status, error_kind, error, context_passage_ids,
prompt_tokens, completion_tokens) and ``artifacts/<ds>/usage/read_medical-<method>.json``
(``llm_usage`` = the client's usage). Failed calls are status rows; the stage fails only if
more than ``medical_qa.max_failure_rate`` of the questions failed.
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import check_failure_rate
from stages._medical import MedicalStage, run_medical_stage

app = typer.Typer(add_completion=False)


def read(run: MedicalStage) -> dict[str, object]:
    """Answer every question; write the answers and the usage summary."""
    from evichain.io import write_json, write_parquet
    from flows.medical import read_medical_flow

    medical, paths, method = run.medical, run.paths, run.method
    llm = medical.answer_llm(run.params.llm)
    table, usage = run.flow(read_medical_flow, paths.questions, paths.corpus, paths.run(method),
                            medical.context_k, llm, run.stage)
    write_parquet(table, paths.qa(f"medqa-{method}"))
    failed = int((table["status"] != "ok").sum())
    summary = {"stage": run.stage, "dataset": run.dataset, "method": method, "model": llm.model,
               "questions": len(table), "failed": failed, "idk": int(table["idk"].sum()),
               "prompt_tokens": int(table["prompt_tokens"].sum()),
               "completion_tokens": int(table["completion_tokens"].sum()),
               "llm_usage": usage.as_dict()}
    write_json(summary, paths.usage(f"read_medical-{method}"))
    check_failure_rate(failed, len(table), medical.max_failure_rate,
                       key="medical_qa.max_failure_rate", what="answers",
                       see=paths.qa(f"medqa-{method}"))
    return {k: summary[k] for k in ("dataset", "method", "questions", "failed", "idk")}


@app.command()
def main(dataset: str = typer.Option(...), method: str = typer.Option(...),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    run_medical_stage("read_medical", dataset, method, params_file, read)


if __name__ == "__main__":
    app()
