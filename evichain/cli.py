"""The ``evichain`` command: LLM cache tools and a params check.

DVC stages are the way to run the pipeline (``dvc repro``); this command holds the chores
around it that a user runs by hand:

* ``evichain cache stats``: rows and tokens per prompt in the LLM cache.
* ``evichain cache import FILE...``: copy a recorded cache (e.g. ``reproduce/*.sqlite``) into
  the LLM cache, so that a stage re-run on this machine repeats none of the recorded calls. A
  long offline-LLM run that does not fit one sitting is resumed this way on another machine.
* ``evichain cache export FILE --since T [--prompt NAME]``: write one run's answers to a new,
  compact cache file to commit under ``reproduce/``.
* ``evichain params check [PATH]``: validate ``params.yaml`` (each error names the bad key).

The cache is ``$EVICHAIN_LLM_CACHE`` or the per-user default (:mod:`evichain.llm.cache`);
``--cache`` points at another file.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from evichain.config import ParamsError, load_params
from evichain.llm.cache import LLMCache, default_cache_path, read_summary

app = typer.Typer(help="evichain: LLM cache tools and a params check (run stages with dvc repro).",
                  no_args_is_help=True, add_completion=False)
cache_app = typer.Typer(help="Inspect, import and export the LLM response cache.",
                        no_args_is_help=True)
params_app = typer.Typer(help="Validate params files.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")
app.add_typer(params_app, name="params")

CacheOption = Annotated[Path | None, typer.Option(
    "--cache", help="cache file (default: $EVICHAIN_LLM_CACHE or the per-user cache)")]


def parse_time(text: str) -> float:
    """Unix time from seconds (``1764583550``) or ISO 8601 (``2026-12-01T10:05``, local time
    when no offset is given); a clear error otherwise."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise typer.BadParameter(f"{text!r} is neither Unix seconds nor an ISO 8601 time "
                                 "such as 2026-12-01T10:05") from None


def _fail(exc: Exception) -> NoReturn:
    """Print ``exc`` as one error line and exit 2."""
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2)


@cache_app.command("stats")
def cache_stats(cache: CacheOption = None) -> None:
    """Rows, prompt tokens and completion tokens per prompt key (the file opened read-only)."""
    path = cache or default_cache_path()
    try:
        rows = read_summary(path)
    except FileNotFoundError as exc:
        _fail(exc)
    typer.echo(f"{path}: {sum(r[1] for r in rows)} responses")
    for prompt, n, p_tok, c_tok in rows:
        typer.echo(f"  {prompt:<40} {n:>7} rows {p_tok:>11,} prompt {c_tok:>9,} completion")


@cache_app.command("import")
def cache_import(sources: Annotated[list[Path], typer.Argument(help="recorded cache files")],
                 cache: CacheOption = None) -> None:
    """Copy the rows of recorded cache files that the cache lacks (existing answers are kept)."""
    store = LLMCache(cache)
    for source in sources:
        try:
            added = store.merge(source)
        except FileNotFoundError as exc:
            _fail(exc)
        typer.echo(f"{source}: {added} new responses -> {store.path}")


@cache_app.command("export")
def cache_export(
    dest: Annotated[Path, typer.Argument(help="new cache file to write (must not exist)")],
    since: Annotated[str | None, typer.Option(
        help="only rows stored at or after this time (Unix seconds or ISO 8601)")] = None,
    prompt: Annotated[list[str] | None, typer.Option(
        help="only this prompt name (repeatable), e.g. iterative.self_ask")] = None,
    cache: CacheOption = None,
) -> None:
    """Write selected rows to a new compact cache file (e.g. one run's answers to commit)."""
    store = LLMCache(cache)
    try:
        written = store.export(dest, since=None if since is None else parse_time(since),
                               prompts=prompt or [])
    except FileExistsError as exc:
        _fail(exc)
    typer.echo(f"{dest}: {written} responses from {store.path}")


@params_app.command("check")
def params_check(path: Annotated[Path, typer.Argument(help="params file")] = Path("params.yaml"),
                 ) -> None:
    """Validate a params file; exit 1 with one line per bad key."""
    try:
        load_params(path)
    except ParamsError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None
    typer.echo(f"{path}: valid")


if __name__ == "__main__":
    app()
