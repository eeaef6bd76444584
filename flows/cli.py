"""The ``evichain`` console command: the library's chores (:mod:`evichain.cli`: ``methods``,
``cache stats|import|export``, ``params check``, ``compare-methods``, ``qa-traces``,
``sensitivity``) plus ``run``, which runs one registered method on a user's own files through
the flows (:mod:`flows.user`). ``run`` lives here, not in the library, because it orchestrates
flows: dependencies point one way (library ← flows ← stages / this command).

``evichain run --method dense --corpus my.jsonl --questions q.jsonl --gold gold.jsonl``

Before any LLM call ``run`` prints the LLM calls it will make and their estimated time
(:mod:`evichain.methods.estimate`); ``--index-like <dataset>`` builds the index with the
index settings of a benchmark dataset (:mod:`evichain.methods.index_settings`); SIGINT and
SIGTERM stop it within seconds, with the servers it started (:func:`flows.stopping.interruptible`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evichain.cli import _fail, app

if TYPE_CHECKING:
    from evichain.config import Params
    from evichain.methods.estimate import CallEstimate

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


def _count(n: int) -> str:
    return f"{n:,}"


def estimate_lines(estimate: CallEstimate, params: Params, seconds_per_call: float | None) -> list[str]:
    """The two lines printed before any LLM call: the calls (index + per question = total,
    each with its rule) and their time (calls × seconds per call / ``llm.concurrency``, with
    where the seconds come from)."""
    from evichain.methods.estimate import call_time
    from evichain.methods.estimate import seconds_per_call as per_call_of
    from flows.common import format_duration

    parts = []
    for item in estimate.index:
        cached = "" if item.cached is None else f", {_count(item.cached)} already in the LLM cache"
        parts.append(f"index {_count(item.to_make)} ({item.label}: {item.rule}{cached})")
    if estimate.per_question is None:
        parts.append(f"questions unknown ({estimate.question_rule})")
    else:
        parts.append(f"questions ≤ {_count(estimate.question_calls or 0)} (≤ {estimate.per_question} "
                     f"per question × {_count(estimate.questions)}: {estimate.question_rule})")
    total = "unknown" if estimate.total is None else f"≤ {_count(estimate.total)}"
    calls_line = (f"LLM calls to make (before retries and repair turns): {' + '.join(parts)} "
                  f"= {total}")
    per_call = per_call_of(params.llm, seconds_per_call)
    concurrency = params.llm.concurrency
    seconds = None if estimate.total is None else call_time(estimate.total, per_call, concurrency)
    if seconds is None:
        time_line = f"LLM time: unknown ({per_call.source})"
    else:
        time_line = (f"LLM time: ~{format_duration(seconds)} ({_count(estimate.total or 0)} calls × "
                     f"{per_call.seconds:g} s / llm.concurrency {concurrency}; {per_call.seconds:g} s: "
                     f"{per_call.source})")
    return [calls_line, time_line]


def kept_text(calls_llm: bool, out: Path) -> str:
    """What an interrupted run keeps (the end of :func:`flows.stopping.interrupted_line`)."""
    from evichain.llm.cache import default_cache_path

    files = f"the files written so far under {out}"
    if not calls_llm:
        return f"{files}; the same command starts the run again"
    return (f"the LLM cache {default_cache_path()} keeps every answer received, so the same command "
            f"resumes from it; {files}")


def _start_servers(params: Params, calls_llm: bool) -> None:
    """Prefect's temporary server and (an LLM run on the bundled model) the local model server,
    started from the main thread so that they die with the run (:mod:`flows.user`)."""
    from flows.stopping import start_local_model, start_prefect_server

    start_prefect_server()
    if calls_llm:
        start_local_model(params)


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
    index_like: Annotated[str | None, typer.Option(
        help="build the index with the index settings of this benchmark dataset (e.g. musique: "
             "LLM-free sentence propositions, triples from them, restricted CEE facets)")] = None,
    seconds_per_call: Annotated[float | None, typer.Option(
        min=0.0, help="seconds one LLM call takes here, for the time estimate printed before "
                      "any call (default: the backend's documented figure)")] = None,
) -> None:
    """Run one method on your own corpus and questions; with gold passages, score it."""
    _bootstrap_env()
    from evichain.config import ParamsError, load_params
    from evichain.data.user import UserDataError, load_user_dataset
    from evichain.methods.base import UnknownMethodError, get_method
    from evichain.methods.estimate import estimate_calls
    from evichain.methods.index_settings import describe, settings_like

    replay = os.environ.get("EVICHAIN_LLM_REPLAY") == "1"
    try:
        chosen = get_method(method)
        params = load_params(params_file)
        like_line = describe(params, index_like) if index_like is not None else None
        if index_like is not None:
            params = settings_like(params, index_like)
        chosen_variant = chosen.check_variant(variant)
        if chosen.uses_llm and not replay:
            params.llm.api_key()  # an unset key stops here, before any file is read or written
        data = load_user_dataset(corpus, questions, gold)
        estimate = estimate_calls(chosen, chosen_variant, params, data.corpus, len(data.questions))
        calls_llm = chosen.uses_llm or any(i.calls for i in estimate.index)
        if calls_llm and not replay:
            params.llm.api_key()  # an index built by an LLM needs the key as well
    except (UnknownMethodError, ParamsError, UserDataError, ValueError) as exc:
        _fail(exc)
    from evichain.llm.failures import FailureRateExceeded
    from flows.stopping import interruptible
    from flows.user import run_user

    if like_line is not None:
        typer.echo(like_line)
    if calls_llm:
        for line in estimate_lines(estimate, params, seconds_per_call):
            typer.echo(line)
    try:
        with interruptible(kept_text(calls_llm, out)):
            _start_servers(params, calls_llm)
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
