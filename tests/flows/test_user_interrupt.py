"""``evichain run`` stopped by a signal (issue 61): a real ``python -m flows.cli run`` process
with its own temporary Prefect server (``PREFECT_API_URL`` unset) on an LLM endpoint that
never answers. Once the first request arrives the test sends SIGINT / SIGTERM (the run must
exit within seconds with 130 / 143, one line saying what was kept, and no child process left)
or SIGKILL (uncatchable: the Prefect server must die with it, ``PR_SET_PDEATHSIG``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest
import yaml

from tests.fixtures.lothair import write_jsonl, write_user_corpus

ROOT = Path(__file__).resolve().parents[2]
FIRST_REQUEST_TIMEOUT_S = 240  # imports, a fresh Prefect database, MiniLM: slow on 2 busy cores
EXIT_WITHIN_S = 10.0


class SlowEndpoint(ThreadingHTTPServer):
    """An OpenAI-style endpoint that records each request and never answers it."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Hold)
        self.arrived = threading.Event()
        self.release = threading.Event()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Hold(BaseHTTPRequestHandler):
    server: SlowEndpoint

    def do_POST(self) -> None:  # noqa: N802 - the http.server name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.arrived.set()
        self.server.release.wait(120)  # the client is gone long before

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture()
def endpoint() -> Iterator[SlowEndpoint]:
    server = SlowEndpoint()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()


def _command(tmp_path: Path, api_base: str) -> list[str]:
    corpus = write_user_corpus(tmp_path / "corpus.jsonl")
    questions = write_jsonl(tmp_path / "questions.jsonl", [
        {"id": "q1", "question": "When did Lothair II's mother die?"},
        {"id": "q2", "question": "Which lake lies on the north side of the Alps?"}])
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({
        "llm": {"model": "openai/slow", "api_base": api_base, "api_key_env": "EVICHAIN_TEST_KEY",
                "max_retries": 0, "timeout_s": 300},
        "expansion": {"hyde": {"n_samples": 1}},
        "orchestration": {"max_workers": 2}}), encoding="utf-8")
    return [sys.executable, "-m", "flows.cli", "run", "--method", "hyde", "--corpus", str(corpus),
            "--questions", str(questions), "--out", str(tmp_path / "out"), "--params", str(params),
            "--seconds-per-call", "2"]


def _environment(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(EVICHAIN_TEST_KEY="sk-test", PREFECT_HOME=str(tmp_path / "prefect"),
               EVICHAIN_LLM_CACHE=str(tmp_path / "llm-cache.sqlite"), PYTHONUNBUFFERED="1")
    return env


def _start(tmp_path: Path, endpoint: SlowEndpoint) -> tuple[subprocess.Popen[str], list[psutil.Process]]:
    """The run, started and waited for until its first LLM request; its descendants then."""
    proc = subprocess.Popen(_command(tmp_path, endpoint.api_base), cwd=ROOT, env=_environment(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if not endpoint.arrived.wait(FIRST_REQUEST_TIMEOUT_S):
        proc.kill()
        pytest.fail(f"no LLM request within {FIRST_REQUEST_TIMEOUT_S}s:\n{proc.communicate()[0][-3000:]}")
    return proc, psutil.Process(proc.pid).children(recursive=True)


def _gone(children: list[psutil.Process], within_s: float) -> list[str]:
    """The children still alive after ``within_s`` seconds (as ``pid cmdline``)."""
    _, alive = psutil.wait_procs(children, timeout=within_s)
    out = []
    for p in alive:
        try:
            out.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
        except psutil.Error:
            continue
    for p in alive:
        p.kill()
    return out


@pytest.mark.parametrize(("signum", "code", "name"), [(signal.SIGINT, 130, "SIGINT"),
                                                      (signal.SIGTERM, 143, "SIGTERM")])
def test_signal_stops_the_run_and_its_servers(tmp_path: Path, endpoint: SlowEndpoint, signum: int,
                                              code: int, name: str) -> None:
    proc, children = _start(tmp_path, endpoint)
    assert any("prefect.server.api.server" in " ".join(c.cmdline()) for c in children), children
    start = time.monotonic()
    proc.send_signal(signum)
    try:
        output, _ = proc.communicate(timeout=EXIT_WITHIN_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"{name}: still running after {EXIT_WITHIN_S}s:\n{proc.communicate()[0][-3000:]}")
    took = time.monotonic() - start
    assert proc.returncode == code, output[-3000:]
    lines = [line for line in output.splitlines() if line.startswith("interrupted by")]
    assert len(lines) == 1, output[-3000:]
    assert lines[0].startswith(f"interrupted by {name}: stopped the run and the processes it "
                               f"started (Prefect server pid ")
    assert "kept: the LLM cache" in lines[0] and "resumes from it" in lines[0]
    assert "LLM calls to make" in output  # the estimate came before the first call
    assert _gone(children, 1.0) == []
    print(f"{name}: exited {took:.2f}s after the signal")  # shown with pytest -s


def test_sigkill_takes_the_prefect_server_along(tmp_path: Path, endpoint: SlowEndpoint) -> None:
    proc, children = _start(tmp_path, endpoint)
    servers = [c for c in children if "prefect.server.api.server" in " ".join(c.cmdline())]
    assert servers, children
    proc.kill()
    proc.communicate(timeout=EXIT_WITHIN_S)
    assert _gone(servers, 5.0) == []
