"""The ``evichain`` command's library chores: LLM cache tools, a params check, the method
listing and report tools.

DVC stages are the way to run the pipeline (``dvc repro``); this command holds the chores
around it that a user runs by hand (``evichain run``, which runs one method on a user's own
files through the flows, is added by :mod:`flows.cli`, the console entry point):

* ``evichain methods [--params PATH]``: every registered method with its family, variants,
  whether its default variant calls an LLM at query time, the index it reads besides the
  passages (propositions, triples, CEE facets, a first-stage run) and whether an LLM builds
  that index under the params (all declared by the methods: ``Method.index_sources``).
* ``evichain cache stats``: rows and tokens per prompt in the LLM cache.
* ``evichain cache import FILE...``: copy a recorded cache (e.g. ``reproduce/*.sqlite``) into
  the LLM cache, so that a stage re-run on this machine repeats none of the recorded calls. A
  long offline-LLM run that does not fit one sitting is resumed this way on another machine.
* ``evichain cache export FILE --since T [--prompt NAME]``: write one run's answers to a new,
  compact cache file to commit under ``reproduce/``.
* ``evichain params check [PATH]``: validate ``params.yaml`` (each error names the bad key).
* ``evichain compare-methods DATASET A B [--metrics M,...] [--by COLUMN]``: paired bootstrap
  difference of two evaluated methods (:mod:`evichain.report.compare`).
* ``evichain qa-traces DATASET --methods M,...``: the shared reader's answers split by what its
  context held (:mod:`evichain.report.qa_traces`).
* ``evichain trace RUN QUESTION_ID [--dataset D] [--k K]``: one question's path through a
  method: its gold passages, the method's recorded steps and the top k with gold marked
  (:mod:`evichain.report.trace`); RUN is a run of the dataset or an ``evichain run`` folder.
* ``evichain sensitivity [--dataset D] [--method M] [--metric X]``: sensitivity lines of a
  one-at-a-time ``dvc exp`` sweep (:mod:`evichain.report.sensitivity_lines`).

The cache is ``$EVICHAIN_LLM_CACHE`` or the per-user default (:mod:`evichain.llm.cache`);
``--cache`` points at another file.
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from evichain.config import Params, ParamsError, load_params, parse_params
from evichain.llm.cache import LLMCache, default_cache_path, read_summary
from evichain.methods.base import IndexSource

app = typer.Typer(help="evichain: run a method on your own data, list the methods, LLM cache "
                       "tools, a params check and report tools (the pipeline runs with dvc repro).",
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


def method_rows(params: Params) -> tuple[list[tuple[str, ...]], dict[str, IndexSource]]:
    """One row per registered method (name, family, query-time LLM of its default variant, the
    index it reads, whether an LLM builds that index, variants with the default starred), and
    every index source those default variants read, by description. All of it comes from the
    methods: :meth:`~evichain.methods.base.Method.calls_llm`, ``Method.sources`` and
    :class:`~evichain.methods.base.IndexSource`."""
    from evichain.methods.base import methods

    rows: list[tuple[str, ...]] = []
    read: dict[str, IndexSource] = {}
    for m in methods().values():
        default = m.check_variant(None)
        sources = m.sources(params, default)
        read.update({s.describe(): s for s in sources})
        index = ", ".join(s.describe() for s in sources) or "passages only"
        built = ", ".join(dict.fromkeys(s.llm_column(params) for s in sources)) or "no"
        variants = ", ".join(f"{v}*" if v == default and len(m.variants) > 1 else v
                             for v in m.variants)
        rows.append((m.name, m.family, "yes" if m.calls_llm(params, default) else "no", index,
                     built, variants))
    return rows, read


@app.command("methods")
def list_methods(params_file: Annotated[Path, typer.Option(
        "--params", help="params file the LLM settings are read under")] = Path("params.yaml"),
                 ) -> None:
    """List the methods: family, LLM use at query time and in the index, index read, variants."""
    try:
        default_missing = params_file == Path("params.yaml") and not params_file.exists()
        params = parse_params({}) if default_missing else load_params(params_file)
        rows, read = method_rows(params)
    except (ParamsError, FileNotFoundError) as exc:
        _fail(exc)
    head = ("method", "family", "query LLM", "index read (default variant)", "index LLM",
            "variants (* default)")
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(5)]
    for row in (head, *rows):
        typer.echo("  ".join(c.ljust(w) for c, w in zip(row[:5], widths, strict=True)) + "  " + row[5])
    source = "the default params (no params.yaml here)" if default_missing else params_file
    typer.echo("query LLM: the default variant calls an LLM per question. index read: the tables "
               "besides the passages (the stage that builds them). index LLM: who builds them, "
               f"under {source}:")
    for described, index_source in sorted(read.items()):
        typer.echo(f"  {described}: {index_source.llm_note(params)}")


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



def _names(values: list[str] | None) -> list[str]:
    """The values of a repeatable option, each of which may also be a comma-separated list."""
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


@app.command("compare-methods")
def compare_methods(
    dataset: Annotated[str, typer.Argument(help="dataset (reads <eval-dir>/<dataset>/<method>.parquet)")],
    a: Annotated[str, typer.Argument(help="method whose score comes first in a − b")],
    b: Annotated[str, typer.Argument(help="the other method")],
    metrics: Annotated[list[str] | None, typer.Option(
        help="metric (repeatable or comma-separated; default: R@2, R@5, R@10, Chain@5, "
             "MAP@10, nDCG@10)")] = None,
    eval_dir: Annotated[Path, typer.Option(help="per-question tables")] = Path("reports/eval"),
    by: Annotated[str | None, typer.Option(
        help="also print per-group means by this questions.parquet column")] = None,
) -> None:
    """Paired bootstrap difference a − b per metric (95% CI, points), as the report computes it."""
    from evichain.io import read_table
    from evichain.paths import DatasetPaths
    from evichain.report.compare import DEFAULT_METRICS, report

    chosen = tuple(_names(metrics)) or DEFAULT_METRICS
    try:
        questions = read_table(DatasetPaths(dataset).questions) if by else None
        typer.echo(report(eval_dir, dataset, a, b, chosen, questions=questions, by=by))
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)


@app.command("qa-traces")
def qa_traces(
    dataset: Annotated[str, typer.Argument(help="dataset whose reader answers are read")],
    methods: Annotated[list[str], typer.Option(
        help="runs the reader answered over, e.g. direct (repeatable or comma-separated)")],
    root: Annotated[Path, typer.Option(help="artifacts folder")] = Path("artifacts"),
) -> None:
    """The reader's EM / F1 / abstentions per group: all gold read, answer in context or not."""
    from evichain.paths import DatasetPaths
    from evichain.report.qa_traces import report

    try:
        typer.echo(report(DatasetPaths(dataset, root), _names(methods)))
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)


@app.command("trace")
def trace(
    run: Annotated[str, typer.Argument(
        help="a run of --dataset (artifacts/<dataset>/runs/<run>.parquet, e.g. evireform-full) or "
             "an `evichain run` output folder (<out>, or <out>/<label> when it holds several)")],
    question_id: Annotated[str, typer.Argument(help="the question's id")],
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="dataset of a run name")] = "demo",
    k: Annotated[int, typer.Option(min=1, help="ranks shown and the recall cut-off")] = 10,
    root: Annotated[Path, typer.Option(help="artifacts folder")] = Path("artifacts"),
) -> None:
    """One question's path through a method: gold, the method's steps, the top k with gold marked.

    The steps are what the method's trace table holds (EviReform's selected propositions and
    residual queries, CEE's probes per round, the iterative methods' steps, ...); see
    evichain/report/trace.py."""
    from evichain.report.trace import TraceError, format_trace, locate_run, question_trace

    try:
        typer.echo(format_trace(question_trace(locate_run(run, dataset, root), question_id, k)))
    except TraceError as exc:
        _fail(exc)


@app.command("sensitivity")
def sensitivity(
    dataset: Annotated[list[str] | None, typer.Option(help="dataset (repeatable; default: demo)")
                       ] = None,
    method: Annotated[list[str] | None, typer.Option(
        help="method (repeatable; default: evireform-full)")] = None,
    metric: Annotated[list[str] | None, typer.Option(
        help="metric (repeatable; default: Recall@5 and Chain@5)")] = None,
    show_json: Annotated[Path | None, typer.Option(
        help="a saved `dvc exp show --json` (default: run `dvc exp show --json -n 20` here)")] = None,
    params_file: Annotated[Path, typer.Option("--params", help="params file (defaults marked)")
                           ] = Path("params.yaml"),
) -> None:
    """Plot the one-at-a-time dvc exp sweep's sensitivity lines.

    Reads `dvc exp show --json` (README "Parameters") and writes reports/plots/sensitivity.csv
    and reports/sensitivity/<metric>.png."""
    from evichain.report.sensitivity_lines import write_sensitivity

    if show_json is None:
        listing = subprocess.run(["dvc", "exp", "show", "--json", "-n", "20"], check=True,
                                 capture_output=True, text=True).stdout
    else:
        listing = show_json.read_text(encoding="utf-8")
    try:
        params = load_params(params_file).model_dump()
        n, csv, folder = write_sensitivity(json.loads(listing), dataset or ["demo"],
                                           method or ["evireform-full"],
                                           metric or ["Recall@5", "Chain@5"], params)
    except (ValueError, ParamsError) as exc:
        _fail(exc)
    typer.echo(f"{n} sweep points -> {csv}, {folder}/")


if __name__ == "__main__":
    app()
