"""``evichain run``: one registered method on a user's own corpus and questions, end to end.

1. Read and validate the JSONL files (:mod:`evichain.data.user`) and write the two tables
   under ``<out>/artifacts/<name>/`` (the layout of every benchmark dataset).
2. Build the tables the method reads (:meth:`evichain.methods.base.Method.tables`) with the
   same flows the index stages run (checkpoints, retries, progress): proposition extraction +
   entity canonicalisation, HippoRAG's OpenIE, CEE's facets, or the dense run a reranker
   cuts its pools from.
3. Run the method through the one retrieval flow of ``dvc repro`` (:mod:`flows.method`):
   built from the registry, every question a Prefect task.
4. Write ``<out>/<label>.parquet`` (run rows in the user's passage ids), ``<label>.trec`` (TREC
   run format), ``<label>-trace.parquet`` and, with gold passages, ``<label>-per_question.parquet``
   and ``<label>-metrics.json`` (the evaluate stage's metrics, ``evaluate.ks``).

Between 4's run/trace files and its metrics, the stages' failure rule
(:func:`evichain.llm.failures.check_llm_failures`): above ``llm.max_failure_rate`` of failed
LLM requests or failed questions, :class:`~evichain.llm.failures.FailureRateExceeded` is raised
and no metrics are written, so a ranking made of fallbacks never passes for the method's. An
LLM method's counts (:func:`~evichain.llm.failures.llm_failure_counts`) go into its metrics.

Stopping (``evichain run`` wraps steps 2-4 in :func:`interruptible`): SIGINT / SIGTERM end the
run within seconds. Python's C-level signal handler writes the signal number to a pipe
(:func:`signal.set_wakeup_fd`) whichever Python handler is installed at that moment (Prefect
swaps in its own SIGTERM handler while a flow runs, and its task runner then waits for running
tasks), and a watcher thread reading that pipe stops every child process of the run
(:func:`stop_children`: Prefect's temporary server, the local model server, Dask workers),
prints one line saying what was kept and ends the process at once with 128 + the signal number
(130 / 143): queued LLM requests are abandoned, the one in flight loses its server, and no
worker thread is waited for. SIGKILL cannot be caught: the servers the run starts from its main
thread get ``PR_SET_PDEATHSIG`` (Linux), so the kernel kills them when the run dies
(:func:`start_prefect_server`, :func:`start_local_model`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import pandas as pd

from evichain.config import Params
from evichain.data.user import UserDataset
from evichain.io import read_parquet, write_json, write_parquet, write_text
from evichain.llm.failures import check_llm_failures, llm_failure_counts
from evichain.methods.base import PROPOSITION_TABLES, Method
from evichain.metrics.retrieval import aggregate, per_question_metrics
from evichain.paths import DatasetPaths
from flows.method import run_method


@dataclass
class UserRunOutput:
    """What :func:`run_user` wrote, the means when gold passages were given, the LLM tokens and
    (an LLM method's) failure counts."""

    files: dict[str, Path]
    metrics: dict[str, float] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)


def write_dataset(data: UserDataset, paths: DatasetPaths) -> None:
    """The user's tables (and the id map) where the index flows look for them."""
    write_parquet(data.corpus, paths.corpus)
    write_parquet(data.questions, paths.questions)
    write_parquet(data.id_map, paths.dir / "id_map.parquet")


def proposition_tables(paths: DatasetPaths, params: Params, name: str) -> dict[str, pd.DataFrame]:
    """EviReform's index tables: the extraction flow (``evireform.index``), then canonicalisation."""
    from evichain.methods.evireform.canonicalize import canonicalize
    from flows.evireform import run_extraction

    index = params.evireform.index.for_dataset(name)
    out = run_extraction(paths, index, params.llm, orch=params.orchestration)
    titles = read_parquet(paths.corpus)["title"].tolist()
    entities, incidence = canonicalize(out.propositions, titles, index.fuzzy_threshold,
                                       index.fuzzy_min_chars)
    tables = {"propositions": out.propositions, "entities": entities, "incidence": incidence}
    for key, table in tables.items():
        write_parquet(table, paths.index_file(f"{key}.parquet"))
    return tables


def triples_table(paths: DatasetPaths, params: Params, name: str) -> pd.DataFrame:
    """HippoRAG 2's OpenIE triples (``graph.openie``), as ``extract_triples`` builds them."""
    from flows.graph import run_extraction

    out = run_extraction(paths, params.graph, params.graph.openie_for(name), params.llm,
                         orch=params.orchestration)
    write_parquet(out.triples, paths.index_file("triples.parquet"))
    return out.triples


def facets_table(paths: DatasetPaths, params: Params, variant: str) -> pd.DataFrame:
    """CEE's LLM facet table for ``variant``'s facet settings, as ``generate_facets`` builds it."""
    from evichain.methods.cee.params import variant_params
    from flows.cee import run_facets

    cee = variant_params(params.cee, variant)
    out = run_facets(paths, cee, params.llm, params.embed, orch=params.orchestration)
    write_parquet(out.facets, paths.dir / "facets.parquet")
    return out.facets


def first_stage_run(paths: DatasetPaths, params: Params, method: str) -> pd.DataFrame:
    """A first-stage run (``runs/<method>``) through the same flow, where a reranker reads it."""
    out = run_method(paths, method, None, params, stage=f"retrieve-{method}")
    write_parquet(out.run, paths.run(method))
    return out.run


def index_tables(method: Method, variant: str, params: Params, paths: DatasetPaths
                 ) -> dict[str, pd.DataFrame]:
    """Every table ``method`` (``variant``) reads, built by its index flow and written where the
    retrieval flow reads it."""
    needed = set(method.tables(params, variant))
    tables: dict[str, pd.DataFrame] = {}
    if needed & set(PROPOSITION_TABLES):
        tables.update(proposition_tables(paths, params, paths.dataset))
    if "triples" in needed:
        tables["triples"] = triples_table(paths, params, paths.dataset)
    if "facets" in needed:
        tables["facets"] = facets_table(paths, params, variant)
    for name in sorted(n for n in needed if n.startswith("runs/")):
        tables[name] = first_stage_run(paths, params, name.removeprefix("runs/"))
    return tables


def trec_lines(run: pd.DataFrame, tag: str) -> str:
    """TREC run format: ``qid Q0 docid rank score tag``."""
    return "".join(f"{q} Q0 {p} {r} {s:.6f} {tag}\n" for q, r, p, s in
                   zip(run["question_id"], run["rank"], run["passage_id"], run["score"]))


def run_user(data: UserDataset, method: Method, variant: str, params: Params, out_dir: Path,
             name: str = "user") -> UserRunOutput:
    """Steps 1-4 of the module docstring; returns the written files and the metric means."""
    paths = DatasetPaths(name, root=Path(out_dir) / "artifacts")
    write_dataset(data, paths)
    index_tables(method, variant, params, paths)
    label = method.label(variant)
    result = run_method(paths, method.name, variant, params, stage=f"run-{label}")
    run = result.run
    user_run = data.to_user_ids(run)
    out = Path(out_dir)
    files = {"run": out / f"{label}.parquet", "trec": out / f"{label}.trec",
             "trace": out / f"{label}-trace.parquet"}
    write_parquet(user_run, files["run"])
    write_text(trec_lines(user_run, label), files["trec"])
    write_parquet(result.trace, files["trace"])
    counts = llm_failure_counts(result.summary, result.trace)
    check_llm_failures(counts, params.llm.max_failure_rate, requests_see=files["trace"],
                       questions_see=files["trace"])  # written first, like the stages
    failures = counts if method.uses_llm else {}
    metrics: dict[str, Any] = {}
    if data.has_gold:
        per_q = per_question_metrics(run, data.questions, params.evaluate.ks)
        metrics = aggregate(per_q)
        files["per_question"] = out / f"{label}-per_question.parquet"
        files["metrics"] = out / f"{label}-metrics.json"
        write_parquet(per_q, files["per_question"])
        write_json({"method": label, **metrics, **failures}, files["metrics"])
    return UserRunOutput(files, metrics, result.tokens, failures)


# --------------------------------------------------------------------------- stopping
EXIT_CODES: dict[int, int] = {int(signal.SIGINT): 130, int(signal.SIGTERM): 143}
"""Exit status of a run stopped by a signal: 128 + the signal number (the shells' convention)."""
_STOP_WATCHER = 0  # a byte that is no signal number: the watcher returns


class _PopenDyingWithParent:
    """A stand-in for the :mod:`subprocess` module whose ``Popen`` gives the child a
    ``preexec_fn`` (everything else is the module's own)."""

    def __init__(self, module: ModuleType, preexec: Any) -> None:
        self._module = module
        self._preexec = preexec

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def Popen(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 - the module's name
        kwargs.setdefault("preexec_fn", self._preexec)
        return self._module.Popen(*args, **kwargs)


def start_prefect_server() -> int | None:
    """Start Prefect's temporary server now, from the calling (main) thread, so that the kernel
    kills it when this process dies, even by SIGKILL (``PR_SET_PDEATHSIG`` on Linux; elsewhere
    it starts as Prefect starts it). Prefect starts the same server lazily, from whichever
    thread first needs its API, when ``PREFECT_API_URL`` is unset; started here, every later
    client finds it running, and Prefect's exit hook stops it after a normal end. Returns its
    pid, or ``None`` when ``PREFECT_API_URL`` names a server (not ours to stop)."""
    from prefect.server.api import server as prefect_server
    from prefect.settings import PREFECT_API_URL

    from evichain.llm.local_server import die_with_parent_preexec

    if PREFECT_API_URL.value():
        return None
    srv = prefect_server.SubprocessASGIServer()
    if not srv.running:
        preexec = die_with_parent_preexec()
        real = prefect_server.subprocess
        if preexec is not None:  # the module's only Popen is the server's command
            prefect_server.subprocess = _PopenDyingWithParent(real, preexec)  # type: ignore[assignment]
        try:
            srv.start()
        finally:
            prefect_server.subprocess = real
    return srv.server_process.pid if srv.server_process is not None else None


def start_local_model(params: Params) -> str | None:
    """Start the bundled local model server (``llm.model: local/...``) now, from the calling
    (main) thread, so that it dies with this process (:class:`~evichain.llm.local_server.
    LocalLLMServer` sets ``PR_SET_PDEATHSIG`` for a server started from the main thread); the
    run's LLM clients share it. Returns its API base URL; ``None`` for any other backend and
    under ``EVICHAIN_LLM_REPLAY=1`` (no model is started then)."""
    if not params.llm.model.startswith("local/") or os.environ.get("EVICHAIN_LLM_REPLAY") == "1":
        return None
    from evichain.llm.client import resolve_endpoint

    # acquired for the life of the process, as every client's endpoint is
    return resolve_endpoint(params.llm).api_base


def _describe(proc: Any) -> str:
    """``Prefect server pid 123`` / ``local model server pid 456`` / ``<name> pid 789``."""
    try:
        cmdline = " ".join(proc.cmdline())
        name = proc.name()
    except Exception:  # gone already, or not ours to read
        return f"process pid {proc.pid}"
    if "prefect.server.api.server" in cmdline:
        return f"Prefect server pid {proc.pid}"
    if "llama_cpp.server" in cmdline:
        return f"local model server pid {proc.pid}"
    return f"{name} pid {proc.pid}"


def stop_children(grace_s: float = 3.0) -> list[str]:
    """Stop every descendant process of this one and return their descriptions: local model
    servers by SIGKILL at once (on SIGTERM they finish the request in flight first, which can
    take minutes), the others by SIGTERM, then SIGKILL for any still alive after ``grace_s``."""
    import psutil

    children = psutil.Process().children(recursive=True)
    described = [_describe(p) for p in children]
    for proc, text in zip(children, described):
        with contextlib.suppress(psutil.Error):
            proc.kill() if text.startswith("local model server") else proc.terminate()
    _, alive = psutil.wait_procs(children, timeout=grace_s)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=grace_s)
    return described


def interrupted_line(signum: int, stopped: list[str], kept: str) -> str:
    """The one line a stopped run prints, e.g. ``interrupted by SIGINT: stopped the run and
    the processes it started (Prefect server pid 123); kept: ...``."""
    name = signal.Signals(signum).name
    processes = f"the processes it started ({', '.join(stopped)})" if stopped else "no process"
    return f"interrupted by {name}: stopped the run and {processes}; kept: {kept}"


def _stop_now(signum: int, kept: str) -> None:
    """Stop the children, print :func:`interrupted_line` on stderr and end the process with
    :data:`EXIT_CODES` (``os._exit``: no thread, exit hook or queued task is waited for)."""
    try:
        stopped = stop_children()
    except Exception as exc:  # the line and the exit must come whatever went wrong here
        stopped = [f"stopping the child processes failed: {exc}"]
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os.write(2, (interrupted_line(signum, stopped, kept) + "\n").encode())
    os._exit(EXIT_CODES[signum])


def _watch(fd: int, kept: str) -> None:
    """Read signal numbers from the wakeup pipe; on SIGINT / SIGTERM stop the run
    (:func:`_stop_now`), on :data:`_STOP_WATCHER` return."""
    while True:
        data = os.read(fd, 64)
        for signum in data:
            if signum in EXIT_CODES:
                _stop_now(signum, kept)
            if signum == _STOP_WATCHER:
                return


def _ignore(signum: int, frame: FrameType | None) -> None:
    """The Python-level handler while :func:`interruptible` is active: the watcher thread acts
    (installing a Python handler is what makes the C handler write to the wakeup pipe)."""


@contextlib.contextmanager
def interruptible(kept: str) -> Iterator[None]:
    """Within this context SIGINT and SIGTERM stop the run at once (module docstring, "Stopping");
    ``kept`` says in the printed line what survives (e.g. the LLM cache and how to resume).
    Outside the main thread (where signals cannot be handled) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    previous = {s: signal.signal(s, _ignore) for s in (signal.SIGINT, signal.SIGTERM)}
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    watcher = threading.Thread(target=_watch, args=(read_fd, kept), name="evichain-interrupt",
                               daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous_fd)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        os.write(write_fd, bytes([_STOP_WATCHER]))
        watcher.join()
        os.close(read_fd)
        os.close(write_fd)
