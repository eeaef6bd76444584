"""Shared plumbing of the reliability drills (``scripts/drills``) and their CI tests
(``tests/test_reliability_*.py``): work directories, params, stage runs (in-process or as
subprocesses), the call log of the drill responder, and cache checks.

Every drill runs the real stage entry points (``stages.*``) with the scripted LLM of
:mod:`scripts.drills.responder`; nothing in the pipeline is mocked.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import sqlite3
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from stages._common import bootstrap_env

bootstrap_env()  # quiet, offline environment first (importing stages._common sets it too)
# Prefect's console logging configured on the real streams, before any in-process stage run
# swaps sys.stdout/stderr
importlib.import_module("prefect.main")

ROOT = Path(__file__).resolve().parents[2]

RESPONDER = "scripts.drills.responder:respond"
PYTHON = sys.executable


# --------------------------------------------------------------------------- data
@lru_cache(maxsize=8)
def demo_slice(n_questions: int = 12, max_passages: int = 45) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A real 2Wiki slice built by the demo rules (the demo itself is (12, 45)); checksummed."""
    from evichain.data import demo
    from evichain.data.sources import verify_sources

    verify_sources(ROOT / "data", demo.FILES)
    corpus, questions = demo.convert(ROOT / "data", n_questions, max_passages)
    return corpus, questions


@lru_cache(maxsize=1)
def _twowiki_corpus() -> pd.DataFrame:
    from evichain.data import twowiki
    from evichain.data.sources import verify_sources

    verify_sources(ROOT / "data", (twowiki.CORPUS_FILE,))
    return pd.DataFrame(twowiki.read_corpus_pairs(ROOT / "data" / twowiki.CORPUS_FILE),
                        columns=["title", "text"])


def corpus_slice(n: int, start: int = 0) -> pd.DataFrame:
    """Passages ``start .. start+n-1`` of the 2Wiki corpus (real text), as a corpus table."""
    from evichain.data.schema import make_corpus

    pairs = _twowiki_corpus().iloc[start:start + n]
    return make_corpus(zip(pairs["title"], pairs["text"]))


def write_dataset(work: Path, dataset: str, corpus: pd.DataFrame,
                  questions: pd.DataFrame | None = None) -> None:
    """``artifacts/<dataset>/{corpus,questions}.parquet`` under ``work``."""
    from evichain.io import write_parquet
    from evichain.paths import DatasetPaths

    paths = DatasetPaths(dataset, root=work / "artifacts")
    write_parquet(corpus.reset_index(drop=True), paths.corpus)
    if questions is not None:
        write_parquet(questions.reset_index(drop=True), paths.questions)


def write_params(work: Path, **sections: Any) -> Path:
    """A params.yaml with the scripted model and no backoff, plus ``sections`` (nested dicts)."""
    params: dict[str, Any] = {"datasets": ["demo"], "llm_datasets": ["demo"],
                              "llm": {"model": "scripted/drill", "backoff_base_s": 0.0,
                                      "backoff_max_s": 0.0, "max_retries": 2}}
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(params.get(key), dict):
            params[key] = {**params[key], **value}
        else:
            params[key] = value
    path = work / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return path


def drill_env(work: Path, calls: Path, *, cache: Path, checkpoints: Path,
              latency_s: float = 0.0, faults: str | None = None) -> dict[str, str]:
    """Environment of a drilled stage: responder, call log, LLM cache, checkpoints, faults."""
    env = {"EVICHAIN_SCRIPTED_LLM": RESPONDER, "EVICHAIN_DRILL_CALLS": str(calls),
           "EVICHAIN_LLM_CACHE": str(cache), "EVICHAIN_CHECKPOINT_DIR": str(checkpoints),
           "EVICHAIN_DRILL_LATENCY_S": str(latency_s)}
    if faults:
        env["EVICHAIN_FAULTS"] = faults
    return env


# --------------------------------------------------------------------------- running stages
STAGES = {"prepare": "stages.prepare", "retrieve": "stages.retrieve", "evaluate": "stages.evaluate",
          "extract": "stages.extract_propositions", "canonicalize": "stages.canonicalize_entities",
          "retrieve_evireform": "stages.retrieve_method", "read": "stages.read"}
STAGE_ARGS = {"retrieve_evireform": ("--method", "evireform")}
"""Options a drill stage always gets (the stage module serves several methods)."""


@dataclass
class StageResult:
    exit_code: int
    output: str
    seconds: float
    stderr: str = ""


@contextlib.contextmanager
def patched_env(values: dict[str, str], drop: Sequence[str] = ()) -> Iterator[None]:
    """Set ``values`` and remove ``drop`` in ``os.environ`` for the block; restore after."""
    keys = set(values) | set(drop)
    saved = {k: os.environ.get(k) for k in keys}
    try:
        for k in drop:
            os.environ.pop(k, None)
        os.environ.update(values)
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def chdir(path: Path) -> Iterator[None]:
    old = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def run_inprocess(stage: str, args: Sequence[str], work: Path, env: dict[str, str],
                  drop_env: Sequence[str] = ("EVICHAIN_FAULTS",)) -> StageResult:
    """The stage's typer app in this process (cwd = ``work``), as DVC would call it."""
    import importlib

    from typer.testing import CliRunner

    module = importlib.import_module(STAGES[stage])
    _forget_clients()
    start = time.perf_counter()
    with patched_env(env, drop=[k for k in drop_env if k not in env]), chdir(work):
        result = CliRunner().invoke(module.app, [*STAGE_ARGS.get(stage, ()), *args],
                                    catch_exceptions=False)
    _forget_clients()
    return StageResult(result.exit_code, result.output, time.perf_counter() - start,
                       result.stderr)


def _forget_clients() -> None:
    """The read flow keeps one LLM client per (params, stage) per process: a second in-process
    run must not reuse the first one's client (its fault plan and usage counters)."""
    mod = sys.modules.get("flows.read")
    if mod is not None:
        mod._CLIENTS.clear()


def subprocess_env(env: dict[str, str]) -> dict[str, str]:
    out = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    if "EVICHAIN_FAULTS" not in env:
        out.pop("EVICHAIN_FAULTS", None)
    return out


# ``python -m <module>``, after installing the cache log (see :func:`install_cache_log`)
_INSTRUMENTED = ("import runpy, sys; from scripts.drills.common import install_cache_log; "
                 "install_cache_log(); runpy.run_module(sys.argv.pop(1), run_name='__main__', "
                 "alter_sys=True)")


def start_stage(stage: str, args: Sequence[str], work: Path, env: dict[str, str],
                log: Path, instrument: bool = False) -> subprocess.Popen[bytes]:
    """``python -m stages.<stage> args`` in its own process group (so a kill takes it all);
    ``instrument``: with the LLM cache's lookups and stores logged."""
    fh = open(log, "wb")
    head = [PYTHON, "-c", _INSTRUMENTED] if instrument else [PYTHON, "-m"]
    return subprocess.Popen([*head, STAGES[stage], *STAGE_ARGS.get(stage, ()), *args], cwd=work,
                            env=subprocess_env(env), stdout=fh, stderr=subprocess.STDOUT,
                            start_new_session=True)


def install_cache_log() -> Any:
    """Log every LLM cache lookup (``G``, hit/miss) and store (``P``) of this process to
    ``$EVICHAIN_DRILL_CACHE_LOG`` (``phase<TAB>pid<TAB>hit|miss|put<TAB>key<TAB>time``);
    returns an undo function. Instrumentation only: the cache's behaviour is unchanged."""
    from evichain.llm.cache import LLMCache

    path = os.environ.get("EVICHAIN_DRILL_CACHE_LOG")
    if not path:
        return lambda: None
    get, put = LLMCache.get, LLMCache.put

    def log(phase: str, what: str, key: str) -> None:
        line = f"{phase}\t{os.getpid()}\t{what}\t{key}\t{time.time():.6f}\n".encode()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def logged_get(self: LLMCache, key: str) -> Any:
        hit = get(self, key)
        log("G", "miss" if hit is None else "hit", key)
        return hit

    def logged_put(self: LLMCache, key: str, **kwargs: Any) -> None:
        put(self, key, **kwargs)
        log("P", "put", key)

    LLMCache.get, LLMCache.put = logged_get, logged_put  # type: ignore[method-assign]

    def undo() -> None:
        LLMCache.get, LLMCache.put = get, put  # type: ignore[method-assign]

    return undo


def extraction_cache_keys(texts: Sequence[str], llm: dict[str, Any] | None = None) -> dict[str, str]:
    """paragraph ident → the LLM cache key of its Listing 11 call (as the client computes it)."""
    from types import SimpleNamespace

    from evichain.config import LLMParams
    from evichain.llm.cache import cache_key
    from evichain.llm.client import LLMClient
    from evichain.methods.evireform.prompts import EXTRACT, paragraph_literal
    from scripts.drills.responder import ident_of

    from evichain.methods.evireform.params import IndexParams

    params = LLMParams(**{"model": "scripted/drill", "backoff_base_s": 0.0, "backoff_max_s": 0.0,
                          "max_retries": 2, **(llm or {})})
    # extraction calls use the extraction output budget (evireform.index.max_tokens)
    params = params.model_copy(update={"max_tokens": IndexParams().max_tokens})
    sampling = LLMClient.sampling(SimpleNamespace(params=params))  # type: ignore[arg-type]
    return {ident_of(t): cache_key(model=params.model,
                                   messages=EXTRACT.messages(paragraph=paragraph_literal(t)),
                                   sampling=sampling, schema=EXTRACT.json_schema(),
                                   prompt=EXTRACT.key) for t in texts}


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group that :func:`start_stage` created (this drill's own)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@contextlib.contextmanager
def prefect_backend() -> Iterator[str]:
    """A Prefect API for the drill: ``$PREFECT_API_URL`` if set, else one temporary server for
    all its stage runs (a stage started without one spends ~20 s starting its own)."""
    url = os.environ.get("PREFECT_API_URL")
    if url:
        yield url
        return
    from prefect.settings import get_current_settings
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        url = str(get_current_settings().api.url)
        with patched_env({"PREFECT_API_URL": url}):
            yield url


# --------------------------------------------------------------------------- the call log
@dataclass(frozen=True)
class Call:
    phase: str
    pid: int
    kind: str
    ident: str
    t: float


def read_calls(path: Path) -> list[Call]:
    """The responder's call log (complete lines only: a killed writer may leave half a line)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) == 5:
            out.append(Call(parts[0], int(parts[1]), parts[2], parts[3], float(parts[4])))
    return out


def started(calls: Sequence[Call], kind: str | None = None) -> list[Call]:
    return [c for c in calls if c.phase == "S" and (kind is None or c.kind == kind)]


def finished(calls: Sequence[Call], kind: str | None = None) -> list[Call]:
    return [c for c in calls if c.phase == "E" and (kind is None or c.kind == kind)]


def per_ident(calls: Sequence[Call], kind: str) -> Counter[str]:
    return Counter(c.ident for c in started(calls, kind))


# --------------------------------------------------------------------------- cache checks
def cache_rows(path: Path) -> list[tuple[str, str, str]]:
    """(key, prompt name@version, content) of every cached response (read-only)."""
    if not path.exists():
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
    try:
        return list(conn.execute("SELECT key, prompt, content FROM responses ORDER BY key"))
    finally:
        conn.close()


def cache_count(path: Path, prompt_prefix: str = "") -> int:
    return sum(1 for _, p, _ in cache_rows(path) if p.startswith(prompt_prefix))


def integrity(path: Path) -> str:
    """SQLite's own verdict on the cache file ("ok" when sound)."""
    conn = sqlite3.connect(path, timeout=60)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def _schemas() -> dict[str, tuple[Any, Any]]:
    from evichain.methods.cee import prompts as cee
    from evichain.methods.evireform import prompts as er
    from evichain.qa.prompts import AnswerOut

    return {"evireform.extract": (er.ExtractionResponse, er.extraction_check),
            "evireform.select": (er.SelectionResponse, None),
            "evireform.reformulate": (er.QueriesResponse, None),
            "evireform.judge": (er.JudgeResponse, None),
            "evireform.gaps": (er.GapResponse, None),
            "qa-reader": (AnswerOut, None), "qa-direct": (AnswerOut, None),
            "cee.facets": (cee.FacetResponse, None), "cee.probes_initial": (cee.ProbeResponse, None),
            "cee.probes_next": (cee.ProbeResponse, None), "cee.summary": (cee.SummaryResponse, None)}


def invalid_cache_entries(path: Path) -> list[str]:
    """Keys of cached responses that do not parse and validate against their prompt's schema
    (and check); an entry of an unknown prompt counts as invalid."""
    from evichain.llm import parse_json_object

    schemas = _schemas()
    bad = []
    for key, prompt, content in cache_rows(path):
        schema, check = schemas.get(prompt.split("@")[0], (None, None))
        try:
            if schema is None:
                raise ValueError(f"unknown prompt {prompt}")
            value = schema.model_validate(parse_json_object(content))
            if check is not None:
                check(value)
        except Exception:  # noqa: BLE001 - any failure makes the entry invalid
            bad.append(key)
    return bad


def file_bytes(paths: Sequence[Path]) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in paths}


def write_result(result: dict[str, Any], out: Path | None) -> None:
    """Print the drill's figures and write them as JSON."""
    text = json.dumps(result, indent=2, sort_keys=True, default=str)
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")


def run_drill(script: str, argv: Sequence[str] | None, out: Path | None, keep: bool,
              body: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """One drill's frame: ``body(work)`` in a fresh temporary work directory under a Prefect
    backend; its result gains ``command`` (how to run the drill again) and is printed and written
    to ``out``. The work directory is removed afterwards unless ``keep``."""
    work = Path(tempfile.mkdtemp(prefix=f"drill-{script}-"))
    try:
        with prefect_backend():
            result = body(work)
        result["command"] = f"python -m scripts.drills.{script} " + " ".join(argv or sys.argv[1:])
        write_result(result, out)
        return result
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
