"""DVC stages ``retrieve_iterative@<dataset>-<method>`` (IRCoT, Self-Ask, S2G-RAG: corpus only)
and ``retrieve_iterative_graph@<dataset>-gear`` (GeAR: also the EviReform index): one iterative
baseline on one dataset.

Writes ``runs/<method>.parquet`` (passages by first retrieval, or GeAR's merged order; score
1/rank), ``traces/<method>.parquet`` (one row per question: steps, queries, retrieved ids per
step, stop reason, tokens, repairs, method-specific state; see
:mod:`evichain.methods.iterative.common`), ``evidence/<method>.parquet`` (question_id, position,
passage_id, title, text: the method's own context for ``stages.read --evidence``) and
``usage/retrieve-<method>.json`` (stop reasons, failures, repairs, per-question token means, LLM
usage).
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
        from evichain.io import write_parquet
        from evichain.methods.iterative.params import METHODS
        from evichain.paths import DatasetPaths
        from flows.iterative import run_iterative

        if method not in METHODS:
            raise ValueError(f"--method must be one of {list(METHODS)}, got {method!r}")
        params = load_params(params_file)
        paths = DatasetPaths(dataset)
        out = run_iterative(paths, method, params.iterative, params.llm, params.embed,
                            params.retrieval.bm25, orch=params.orchestration,
                            stage=f"retrieve-{method}")
        evidence = out.evidence.sort_values(["question_id", "position"], kind="stable")
        write_parquet(evidence.reset_index(drop=True), paths.evidence(method))
        # Written first: write_method_outputs fails the stage above llm.max_failure_rate.
        summary = write_method_outputs(dataset, method, method, f"retrieve-{method}", out,
                                       params.llm.max_failure_rate)
        return {"dataset": dataset, "method": method, "questions": summary["questions"],
                "stop_reasons": summary["stop_reasons"], "llm_failures": summary["llm_failures"],
                "llm_calls": summary["llm_usage"].get("calls", 0)}

    from evichain.methods.iterative.params import retrieve_stage_name

    run_stage(retrieve_stage_name(dataset, method), body)


if __name__ == "__main__":
    app()
