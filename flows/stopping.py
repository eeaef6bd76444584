"""Stopping a run on SIGINT / SIGTERM, and the child processes that must die with it.

Used by ``evichain run`` (:mod:`flows.cli`) and by every DVC stage (:func:`stages._common.run_stage`):
without it a stage under ``dvc repro`` ignored Ctrl-C, because the task runner's worker threads
kept the process alive until every queued LLM request had been answered.

SIGINT / SIGTERM end the run within seconds. Python's C-level signal handler writes the signal
number to a pipe (:func:`signal.set_wakeup_fd`) whichever Python handler is installed at that moment (Prefect
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
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evichain.config import Params

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
    if "llama_cpp.server" in cmdline or "llama-server" in name or "llama-server" in cmdline:
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
