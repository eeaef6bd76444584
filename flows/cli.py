"""The ``evichain`` console command: the library's chores (:mod:`evichain.cli`: ``methods``,
``cache stats|import|export``, ``params check``, ``compare-methods``, ``qa-traces``,
``sensitivity``) plus ``run``, which runs one registered method on a user's own files through
the flows (:mod:`flows.user`). ``run`` lives here, not in the library, because it orchestrates
flows: dependencies point one way (library ← flows ← stages / this command).

``evichain run --method dense --corpus my.jsonl --questions q.jsonl --gold gold.jsonl``
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from evichain.cli import _fail, app

__all__ = ["app"]


def _bootstrap_env() -> None:
    """Offline, quiet defaults as every stage sets them (explicit environment values win)."""
    for key, value in {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
                       "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
                       "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1",
                       "TOKENIZERS_PARALLELISM": "false"}.items():
        os.environ.setdefault(key, value)
    if not os.environ.get("PREFECT_API_URL"):
        os.environ.setdefault("PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED", "false")


@app.command("run")
def run(
    method: Annotated[str, typer.Option(help="a registered method: bm25, dense, evireform, cee, "
                                             "proprag, ... (`evichain methods`)")],
    corpus: Annotated[Path, typer.Option(help='JSONL: {"id", "title", "text"} per line')],
    questions: Annotated[Path, typer.Option(help='JSONL: {"id", "question", "answers"?, "gold"?}')],
    gold: Annotated[Path | None, typer.Option(
        help='JSONL: {"question_id", "passage_id"} per gold passage (enables metrics)')] = None,
    variant: Annotated[str | None, typer.Option(help="the method's variant (default: its own)")] = None,
    out: Annotated[Path, typer.Option(help="output folder")] = Path("evichain-out"),
    params_file: Annotated[Path, typer.Option("--params", help="params file")] = Path("params.yaml"),
) -> None:
    """Run one method on your own corpus and questions; with gold passages, score it."""
    _bootstrap_env()
    from evichain.config import ParamsError, load_params
    from evichain.data.user import UserDataError, load_user_dataset
    from evichain.methods.base import UnknownMethodError, get_method

    try:
        chosen = get_method(method)
        params = load_params(params_file)
        chosen_variant = chosen.check_variant(variant)
        if chosen.uses_llm and os.environ.get("EVICHAIN_LLM_REPLAY") != "1":
            params.llm.api_key()  # an unset key stops here, before any file is read or written
        data = load_user_dataset(corpus, questions, gold)
    except (UnknownMethodError, ParamsError, UserDataError, ValueError) as exc:
        _fail(exc)
    from evichain.llm.failures import FailureRateExceeded
    from flows.user import run_user

    try:
        result = run_user(data, chosen, chosen_variant, params, out)
    except FailureRateExceeded as exc:  # the run and trace files are written, the metrics not
        typer.echo(f"error: {exc}; no metrics written", err=True)
        raise typer.Exit(2) from None
    for kind, path in result.files.items():
        typer.echo(f"{kind}: {path}")
    if chosen.uses_llm:
        typer.echo(f"llm tokens: {json.dumps(result.tokens, sort_keys=True)} (retrieval only)")
        typer.echo(f"llm failures: {json.dumps(result.failures, sort_keys=True)} "
                   f"(limit: llm.max_failure_rate {params.llm.max_failure_rate:.1%})")
    if result.metrics:
        shown = {k: round(v, 4) for k, v in result.metrics.items() if "@5" in k or k == "n_questions"}
        typer.echo(f"metrics: {json.dumps(shown, sort_keys=True)}")
    else:
        typer.echo("no gold passages given: ranking only (add --gold or a \"gold\" field for metrics)")


if __name__ == "__main__":
    app()
