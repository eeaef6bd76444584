"""DVC stage ``retrieve_expansion@<dataset>-<method>``: an LLM query expansion baseline
(``hyde``, ``query2doc`` or ``lamer``; CIKM CEE paper Table 1) over the whole corpus.

Reads the corpus and questions; writes ``runs/<method>.parquet`` (question_id, rank,
passage_id, score; ``expansion.top_k`` rows), ``traces/<method>.parquet`` (one row per question:
generated texts, seeds, failed generations and their kinds, status ok / partial / failed,
fallback, expanded query or LameR candidates, tokens) and ``usage/retrieve-<method>.json``
(statuses, fallbacks, failed generations, LLM usage summed over the per-sample clients).
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages._common import run_stage, write_method_outputs

app = typer.Typer(add_completion=False)


@app.command()
def main(dataset: str = typer.Option(...), method: str = typer.Option(...),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.methods.expansion.params import check_method
        from evichain.paths import DatasetPaths
        from flows.expansion import run_expansion

        params = load_params(params_file)
        check_method(method)
        out = run_expansion(DatasetPaths(dataset), method, params.expansion, params.retrieval,
                            params.llm, params.embed, orch=params.orchestration,
                            stage=f"retrieve_expansion-{method}")
        summary = write_method_outputs(dataset, method, method, f"retrieve-{method}", out,
                                       params.llm.max_failure_rate)
        return {"dataset": dataset, "method": method, "questions": summary["questions"],
                "status": summary["status"], "fallbacks": summary["fallbacks"],
                "generations_failed": summary["generations_failed"],
                "llm_calls": summary["llm_usage"].get("calls", 0)}

    run_stage(f"retrieve_expansion@{dataset}-{method}", body)


if __name__ == "__main__":
    app()
