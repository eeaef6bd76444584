"""Run the offline default LLM behind an OpenAI-compatible server on 127.0.0.1.

Two backends serve the same GGUF:

* ``llama-server``: llama.cpp's own server (built once by ``scripts/setup_local_llm.sh`` from the
  sources vendored in the llama-cpp-python sdist, :func:`llama_server_binary`). It decodes
  ``n_parallel`` sequences together (parallel slots, continuous batching), which is where
  concurrent generation-heavy calls gain on 2 cores.
* ``llama-cpp-python``: ``python -m llama_cpp.server``, one request at a time.

:func:`choose_backend` resolves ``auto`` to the first when its binary exists and otherwise to the
second, with a warning that says how to build the first. Neither enters the LLM cache key.

:class:`LocalLLMServer` starts the chosen server on a free port as a child process, waits until
``GET /v1/models`` answers and stops it again (terminate, wait, kill).  Call it from litellm as::

    with LocalLLMServer("qwen2.5-coder-1.5b-instruct-q4_k_m") as srv:
        litellm.completion(
            model=f"openai/{srv.model_alias}", api_base=srv.api_base, api_key="none",
            messages=[...], temperature=0, max_tokens=256,
            response_format={"type": "json_object", "schema": {...}},
        )

(``srv.litellm_kwargs()`` returns the first three keyword arguments.)  The
llama-cpp server turns ``{"type": "json_object", "schema": ...}`` into a
grammar; it rejects OpenAI's ``{"type": "json_schema", ...}`` form.  Without a
schema the small models may loop until ``max_tokens``.

:func:`shared_server` is a reference-counted, process-wide variant: callers
with equal settings share one server, which is stopped at interpreter exit.

``llama_cpp`` is never imported here (it runs in the child process only).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal

import platformdirs

from evichain.llm.local_model import DEFAULT_MODEL_KEY, ensure_gguf, model_dir, resolve_key

log = logging.getLogger(__name__)

Backend = Literal["llama-server", "llama-cpp-python"]
#: llama-cpp-python release whose vendored llama.cpp the llama-server binary is built from
LLAMA_CPP_VERSION = "0.3.36"
#: llama-cpp-python 0.3.36's server defaults for what the client does not send (repeat penalty
#: 1.1 over the last 64 tokens, top-k 40, top-p 0.95, min-p 0.05): llama-server's own defaults
#: differ (no repeat penalty), which made its temperature-0 answers differ and run longer
LLAMA_CPP_PYTHON_SAMPLING: tuple[str, ...] = ("--repeat-penalty", "1.1", "--repeat-last-n", "64",
                                              "--top-k", "40", "--top-p", "0.95", "--min-p", "0.05")

__all__ = [
    "Backend",
    "LocalLLMServer",
    "LocalServerError",
    "acquire_shared_server",
    "choose_backend",
    "die_with_parent_preexec",
    "llama_server_binary",
    "release_shared_server",
    "shared_server",
    "stop_shared_servers",
]

_LOG_TAIL_LINES = 40


class LocalServerError(RuntimeError):
    """The local LLM server could not be started (or died)."""


def _free_port(host: str) -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _tail(path: Path | None, lines: int = _LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of ``path`` (empty string if unreadable)."""
    if path is None or lines <= 0:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def llama_server_binary() -> Path:
    """Where ``scripts/setup_local_llm.sh`` puts llama.cpp's ``llama-server``:
    ``$EVICHAIN_LLAMA_SERVER``, else ``$EVICHAIN_BIN_DIR/llama-server-<version>``, else
    ``<user cache>/evichain/bin/llama-server-<version>`` (it may not exist)."""
    explicit = os.environ.get("EVICHAIN_LLAMA_SERVER")
    if explicit:
        return Path(explicit).expanduser()
    bin_dir = os.environ.get("EVICHAIN_BIN_DIR")
    base = Path(bin_dir).expanduser() if bin_dir else Path(platformdirs.user_cache_dir("evichain")) / "bin"
    return base / f"llama-server-{LLAMA_CPP_VERSION}"


def choose_backend(requested: Literal["auto", "llama-server", "llama-cpp-python"]) -> Backend:
    """``requested`` itself, or for ``auto``: ``llama-server`` when its binary is built, else
    ``llama-cpp-python`` with a warning naming the build command (never silently)."""
    if requested != "auto":
        return requested
    binary = llama_server_binary()
    if binary.is_file() and os.access(binary, os.X_OK):
        return "llama-server"
    log.warning("llama-server is not built (%s): using llama-cpp-python's server, one request at "
                "a time; build it once with `bash scripts/setup_local_llm.sh` (SKIP_LLAMA=1 "
                "SKIP_MODEL=1 builds only the server)", binary)
    return "llama-cpp-python"


def die_with_parent_preexec() -> Any:
    """A ``preexec_fn`` that makes Linux SIGKILL the child when the parent thread dies.

    SIGKILL, not SIGTERM: on SIGTERM uvicorn waits for the request in flight,
    which can take minutes, although nobody is left to read the answer.

    ``libc.prctl`` is resolved here, in the parent, so that the function run
    between fork and exec imports nothing and takes no locks.  Returns
    ``None`` where unavailable. ``evichain run`` starts Prefect's temporary server with it too
    (:func:`flows.stopping.start_prefect_server`).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover
        return None
    pr_set_pdeathsig = 1
    sigkill = int(signal.SIGKILL)

    def _preexec() -> None:  # pragma: no cover - runs in the child
        prctl(pr_set_pdeathsig, sigkill, 0, 0, 0)

    return _preexec


class LocalLLMServer:
    """An OpenAI-compatible llama.cpp server (either backend) in a child process.

    Use as a context manager or call :meth:`start` / :meth:`stop`.

    Args:
        key: Model registry key or short name (see
            :data:`evichain.llm.local_model.MODELS`); its GGUF is assembled
            and verified by :func:`~evichain.llm.local_model.ensure_gguf` on
            :meth:`start` unless ``model_path`` is given.
        model_path: Serve this GGUF instead of the registry file.
        model_alias: Name the server reports and litellm uses
            (``openai/<alias>``); defaults to the registry key.
        n_ctx: Context window in tokens.
        n_threads: Generation threads (default: all CPUs).
        n_threads_batch: Prompt-processing threads (default: ``n_threads``).
        n_batch: Prompt-processing batch size.
        logits_all: Keep logits of every token (needed only for logprobs;
            the server's own default is True, which costs memory and time).
        host: Listen address; keep the loopback default.
        port: Listen port; ``None`` picks a free one.
        startup_timeout: Seconds to wait for ``/v1/models`` to answer.
        log_path: Server log file; default
            ``<model_dir>/logs/llama-server-<alias>-<port>.log``.
        keep_log: Keep the log after a clean :meth:`stop` (it is always kept
            when start-up fails).
        backend: ``llama-server`` (llama.cpp's, batched) or ``llama-cpp-python``.
        n_parallel: ``llama-server`` slots decoded together, each with ``n_ctx`` tokens of
            context (ignored by ``llama-cpp-python``, which serves one request at a time).
        extra_args: More server CLI arguments.
        python: Interpreter that has ``llama-cpp-python[server]`` installed.
        command: Replace the whole command line (tests / debugging); the
            model is then not prepared and ``--port`` is not added.
        env: Extra environment variables for the child.
        die_with_parent: On Linux, SIGKILL the child if the starting thread
            dies; ``None`` = only when started from the main thread (threads
            of a task runner may end before the process does).
        warmup: After start-up send one 1-token chat completion so the first
            real call does not pay for paging in the weights (ignored with
            ``command``; a failed warm-up is only noted in the log).
    """

    def __init__(
        self,
        key: str = DEFAULT_MODEL_KEY,
        *,
        model_path: str | os.PathLike[str] | None = None,
        model_alias: str | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        n_batch: int = 512,
        logits_all: bool = False,
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout: float = 180.0,
        log_path: str | os.PathLike[str] | None = None,
        keep_log: bool = False,
        backend: Backend = "llama-cpp-python",
        n_parallel: int = 1,
        extra_args: Sequence[str] = (),
        python: str = sys.executable,
        command: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        die_with_parent: bool | None = None,
        warmup: bool = True,
    ) -> None:
        # With an explicit model_path/command the key is only a label.
        self.key = resolve_key(key) if model_path is None and command is None else key
        self.model_path: Path | None = Path(model_path) if model_path is not None else None
        self.model_alias: str = model_alias or self.key
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self.n_threads_batch = n_threads_batch or self.n_threads
        self.n_batch = n_batch
        self.logits_all = logits_all
        self.host = host
        self.port: int | None = port
        self.startup_timeout = startup_timeout
        self.log_path: Path | None = Path(log_path) if log_path is not None else None
        self.keep_log = keep_log
        self.backend: Backend = backend
        # llama-cpp-python's server has one slot whatever is asked
        self.n_parallel = max(1, n_parallel) if backend == "llama-server" else 1
        self.extra_args = tuple(extra_args)
        self.python = python
        self.command_override = tuple(command) if command is not None else None
        self.env = dict(env or {})
        self.die_with_parent = die_with_parent
        self.warmup = warmup
        self.warmup_seconds: float | None = None
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_fh: IO[bytes] | None = None
        self._active_log: Path | None = None
        self._t_start = 0.0
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ props
    @property
    def api_base(self) -> str:
        """OpenAI-style base URL, e.g. ``http://127.0.0.1:41234/v1``."""
        if self.port is None:
            raise LocalServerError("server has no port yet; call start() first")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def litellm_model(self) -> str:
        """Model string for litellm: ``openai/<alias>``."""
        return f"openai/{self.model_alias}"

    @property
    def pid(self) -> int | None:
        """PID of the server process, if running."""
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        """True while the child process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def litellm_kwargs(self) -> dict[str, str]:
        """``model``, ``api_base`` and ``api_key`` for ``litellm.completion``."""
        return {"model": self.litellm_model, "api_base": self.api_base, "api_key": "none"}

    # ---------------------------------------------------------------- command
    def build_command(self, model_path: Path, port: int) -> list[str]:
        """The server command line for ``model_path`` on ``port`` (per :attr:`backend`)."""
        if self.backend == "llama-server":
            return self._llama_server_command(model_path, port)
        return [
            self.python, "-m", "llama_cpp.server",
            "--model", str(model_path),
            "--model_alias", self.model_alias,
            "--host", self.host,
            "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads_batch),
            "--n_batch", str(self.n_batch),
            "--logits_all", "true" if self.logits_all else "false",
            *self.extra_args,
        ]  # fmt: skip

    def _llama_server_command(self, model_path: Path, port: int) -> list[str]:
        """``llama-server``: ``n_parallel`` slots of ``n_ctx`` tokens each (``-c`` is the total),
        continuous batching, no web UI, a 1 GiB prompt cache, and the sampling defaults of
        llama-cpp-python's server (:data:`LLAMA_CPP_PYTHON_SAMPLING`), so that both backends
        sample alike: the client sends only temperature, max_tokens, seed and top_p."""
        return [
            str(llama_server_binary()),
            "--model", str(model_path),
            "--alias", self.model_alias,
            "--host", self.host,
            "--port", str(port),
            "--ctx-size", str(self.n_ctx * self.n_parallel),
            "--parallel", str(self.n_parallel),
            "--no-kv-unified",
            "--cont-batching",
            "--threads", str(self.n_threads),
            "--threads-batch", str(self.n_threads_batch),
            "--batch-size", str(self.n_batch),
            "--cache-ram", "1024",
            "--no-webui",
            *LLAMA_CPP_PYTHON_SAMPLING,
            *self.extra_args,
        ]  # fmt: skip

    def _child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        # llama_cpp.server lets HOST/PORT/CONFIG_FILE override the command line.
        for var in ("HOST", "PORT", "CONFIG_FILE"):
            env.pop(var, None)
        env.setdefault("HF_HUB_OFFLINE", "1")  # never reach a model hub
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.update(self.env)
        return env

    def _check_llama_cpp(self) -> None:
        if self.backend == "llama-server":
            binary = llama_server_binary()
            if not (binary.is_file() and os.access(binary, os.X_OK)):
                raise LocalServerError(f"llama-server is not built ({binary}): run "
                                       "`SKIP_LLAMA=1 SKIP_MODEL=1 bash scripts/setup_local_llm.sh`, "
                                       "or set llm.local.backend: llama-cpp-python")
            return
        if self.python != sys.executable:
            return  # cannot check another interpreter cheaply; start-up will tell
        if importlib.util.find_spec("llama_cpp") is None:
            raise LocalServerError(
                "llama-cpp-python is not installed in this environment "
                f"({sys.executable}); run scripts/setup_local_llm.sh"
            )
        missing = [m for m in ("uvicorn", "fastapi", "sse_starlette", "starlette_context",
                               "pydantic_settings") if importlib.util.find_spec(m) is None]
        if missing:
            raise LocalServerError(
                f"llama-cpp-python server extras missing ({', '.join(missing)}); "
                "install with: pip install 'llama-cpp-python[server]==0.3.36' "
                "(or run scripts/setup_local_llm.sh)"
            )

    # -------------------------------------------------------------- lifecycle
    def start(self) -> LocalLLMServer:
        """Start the server and wait until it answers; returns ``self``.

        Raises:
            LocalServerError: The process exited during start-up or did not
                answer within ``startup_timeout`` (message has the log tail).
        """
        with self._lock:
            if self.is_running():
                return self
            if self.command_override is not None:
                if self.port is None:
                    self.port = _free_port(self.host)
                self._spawn(list(self.command_override))
                self._wait_ready()
                return self
            self._check_llama_cpp()
            model_path = self.model_path or ensure_gguf(self.key)
            fixed_port = self.port
            attempts = 1 if fixed_port is not None else 3
            for attempt in range(attempts):
                port = fixed_port if fixed_port is not None else _free_port(self.host)
                self.port = port
                self._spawn(self.build_command(model_path, port))
                try:
                    self._wait_ready()
                    if self.warmup:
                        self._warmup()
                    return self
                except LocalServerError as exc:
                    busy = "address already in use" in str(exc).lower()
                    if not busy or attempt == attempts - 1:
                        raise
            raise AssertionError("unreachable")  # pragma: no cover

    def _default_log_path(self) -> Path:
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in self.model_alias)
        return model_dir() / "logs" / f"llama-server-{safe}-{self.port}.log"

    def _spawn(self, cmd: list[str]) -> None:
        log_path = self.log_path or self._default_log_path()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._active_log = log_path
        self._log_fh = open(log_path, "wb")
        self._log_fh.write(("$ " + " ".join(cmd) + "\n").encode())
        self._log_fh.flush()
        die = self.die_with_parent
        if die is None:
            die = threading.current_thread() is threading.main_thread()
        preexec = die_with_parent_preexec() if die else None
        self._t_start = time.monotonic()
        try:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=self._log_fh,
                stderr=subprocess.STDOUT,
                env=self._child_env(),
                preexec_fn=preexec,
            )
        except OSError as exc:
            self._close_log()
            raise LocalServerError(f"cannot run {cmd[0]!r}: {exc}") from exc

    def _wait_ready(self) -> None:
        assert self._proc is not None
        url = f"{self.api_base}/models"
        deadline = self._t_start + self.startup_timeout
        while True:
            code = self._proc.poll()
            if code is not None:
                self._cleanup_after_failure()
                raise LocalServerError(
                    f"local LLM server exited with code {code} during start-up "
                    f"(log: {self._active_log}). Last lines:\n{_tail(self._active_log)}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2.0) as resp:
                    if resp.status == 200:
                        json.loads(resp.read() or b"{}")
                        self.startup_seconds = time.monotonic() - self._t_start
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError, OSError):
                pass
            if time.monotonic() > deadline:
                self._terminate()
                self._cleanup_after_failure()
                raise LocalServerError(
                    f"local LLM server did not answer {url} within {self.startup_timeout:.0f}s "
                    f"(log: {self._active_log}). Last lines:\n{_tail(self._active_log)}"
                )
            time.sleep(0.25)

    def _warmup(self) -> None:
        """One tiny chat completion (pages the weights in, builds the graph)."""
        body = json.dumps({
            "model": self.model_alias,
            "messages": [{"role": "user", "content": "Hi"}],
            "max_tokens": 1,
            "temperature": 0,
        }).encode()
        req = urllib.request.Request(
            f"{self.api_base}/chat/completions", data=body,
            headers={"Content-Type": "application/json"}, method="POST",
        )
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=max(60.0, self.startup_timeout)) as resp:
                resp.read()
            self.warmup_seconds = time.monotonic() - t0
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
            if self._log_fh is not None:
                with contextlib.suppress(OSError, ValueError):
                    self._log_fh.write(f"[evichain] warm-up request failed: {exc}\n".encode())
                    self._log_fh.flush()

    def _cleanup_after_failure(self) -> None:
        self._proc = None
        self._close_log()  # log is kept for diagnosis

    def _close_log(self) -> None:
        if self._log_fh is not None:
            with contextlib.suppress(OSError):
                self._log_fh.close()
            self._log_fh = None

    def _terminate(self, timeout: float = 10.0) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, wait ``timeout`` s, then SIGKILL); idempotent."""
        with self._lock:
            if self._proc is None:
                return
            self._terminate(timeout)
            self._proc = None
            self._close_log()
            log = self._active_log
            if log is not None and not self.keep_log and self.log_path is None:
                with contextlib.suppress(OSError):
                    log.unlink()

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last lines of the server log (for diagnostics)."""
        return _tail(self._active_log, lines)

    def __enter__(self) -> LocalLLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid={self.pid} {self.api_base}" if self.is_running() else "stopped"
        return f"LocalLLMServer({self.model_alias!r}, {state})"


# ---------------------------------------------------------------- shared pool
_SharedKey = tuple[str, tuple[tuple[str, Any], ...]]
_shared: dict[_SharedKey, list[Any]] = {}  # key -> [server, refcount]
_shared_lock = threading.Lock()
_atexit_registered = False


def _freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


def acquire_shared_server(key: str = DEFAULT_MODEL_KEY, **settings: Any) -> LocalLLMServer:
    """Get (starting if needed) the process-wide server for ``key`` + ``settings``.

    Every call must be paired with :func:`release_shared_server`.  The server
    keeps running when its count drops to zero (so sequential callers do not
    reload the model) and is stopped by :func:`stop_shared_servers`, which
    runs at interpreter exit.  ``settings`` are :class:`LocalLLMServer`
    keyword arguments.
    """
    global _atexit_registered
    skey: _SharedKey = (resolve_key(key), _freeze(settings))
    with _shared_lock:
        if not _atexit_registered:
            atexit.register(stop_shared_servers)
            _atexit_registered = True
        entry = _shared.get(skey)
        if entry is None:
            entry = [LocalLLMServer(key, **settings), 0]
            _shared[skey] = entry
        server: LocalLLMServer = entry[0]
        if not server.is_running():
            # Share the long start-up under the lock: concurrent callers wait
            # for one start instead of each loading the model.
            server.start()
        entry[1] += 1
        return server


def release_shared_server(server: LocalLLMServer, *, stop_if_unused: bool = False) -> None:
    """Drop one reference to a shared server; stop it at zero if ``stop_if_unused``."""
    with _shared_lock:
        for skey, entry in list(_shared.items()):
            if entry[0] is server:
                entry[1] = max(0, entry[1] - 1)
                if entry[1] == 0 and stop_if_unused:
                    server.stop()
                    del _shared[skey]
                return


@contextlib.contextmanager
def shared_server(
    key: str = DEFAULT_MODEL_KEY, *, stop_if_unused: bool = False, **settings: Any
) -> Iterator[LocalLLMServer]:
    """Context manager around :func:`acquire_shared_server` / :func:`release_shared_server`.

    Example::

        with shared_server("qwen2.5-coder-1.5b", n_ctx=4096) as srv:
            litellm.completion(**srv.litellm_kwargs(), messages=...)
    """
    server = acquire_shared_server(key, **settings)
    try:
        yield server
    finally:
        release_shared_server(server, stop_if_unused=stop_if_unused)


def stop_shared_servers() -> None:
    """Stop every shared server (registered with :mod:`atexit`)."""
    with _shared_lock:
        entries = list(_shared.values())
        _shared.clear()
    for server, _count in entries:
        with contextlib.suppress(Exception):
            server.stop()
