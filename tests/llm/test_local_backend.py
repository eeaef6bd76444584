"""The two local backends: command lines, the `auto` choice (never silent), the missing-build
error, and the concurrency bound keyed by (model, limit)."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest

from evichain.llm import client as client_mod
from evichain.llm.local_server import (
    LocalLLMServer,
    LocalServerError,
    choose_backend,
    llama_server_binary,
)
from evichain.llm.params import LLMParams


@pytest.fixture
def fake_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\nexit 0\n")
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("EVICHAIN_LLAMA_SERVER", str(binary))
    return binary


def test_llama_server_command_has_slots_of_n_ctx(fake_binary: Path) -> None:
    srv = LocalLLMServer(model_path="/m.gguf", model_alias="m", backend="llama-server",
                         n_parallel=4, n_ctx=2048, n_threads=2)
    cmd = srv.build_command(Path("/m.gguf"), 1234)
    assert cmd[0] == str(fake_binary)
    args = {flag: cmd[i + 1] for i, flag in enumerate(cmd[:-1]) if flag.startswith("--")}
    assert args["--parallel"] == "4" and args["--ctx-size"] == str(4 * 2048)
    assert "--cont-batching" in cmd and "--no-kv-unified" in cmd
    assert args["--port"] == "1234" and args["--alias"] == "m"
    # sampled like llama-cpp-python's server (its defaults for what the client does not send)
    assert (args["--repeat-penalty"], args["--repeat-last-n"], args["--top-k"], args["--top-p"],
            args["--min-p"]) == ("1.1", "64", "40", "0.95", "0.05")


def test_llama_cpp_python_command_is_the_python_server() -> None:
    srv = LocalLLMServer(model_path="/m.gguf", model_alias="m", n_parallel=4)
    cmd = srv.build_command(Path("/m.gguf"), 1234)
    assert cmd[1:3] == ["-m", "llama_cpp.server"] and "--parallel" not in cmd
    assert srv.n_parallel == 1  # one slot whatever is asked: the client sends one request at a time


def test_auto_prefers_a_built_llama_server(fake_binary: Path) -> None:
    assert llama_server_binary() == fake_binary
    assert choose_backend("auto") == "llama-server"


def test_auto_without_a_build_warns_and_uses_the_old_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("EVICHAIN_LLAMA_SERVER", str(tmp_path / "missing"))
    with caplog.at_level(logging.WARNING):
        assert choose_backend("auto") == "llama-cpp-python"
    assert "llama-server is not built" in caplog.text and "setup_local_llm.sh" in caplog.text
    assert choose_backend("llama-cpp-python") == "llama-cpp-python"


def test_explicit_llama_server_without_a_build_fails_with_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVICHAIN_LLAMA_SERVER", str(tmp_path / "missing"))
    srv = LocalLLMServer(model_path=tmp_path / "m.gguf", backend="llama-server")
    with pytest.raises(LocalServerError, match="setup_local_llm.sh"):
        srv.start()


def test_backend_params_validate() -> None:
    assert LLMParams().local.backend == "auto"
    with pytest.raises(ValueError, match="backend"):
        LLMParams.model_validate({"local": {"backend": "vllm"}})


def test_concurrency_bound_is_per_model_and_limit() -> None:
    a = client_mod._semaphore("openai/x", 2)
    assert client_mod._semaphore("openai/x", 2) is a
    b = client_mod._semaphore("openai/x", 8)
    assert b is not a
    held = [b.acquire(blocking=False) for _ in range(9)]
    assert held.count(True) == 8  # the bound of 8 is not the first client's 2
    for _ in range(8):
        b.release()


@pytest.mark.parametrize("slots, expected", [(1, 1), (4, 4), (8, 4), (None, 4)])
def test_requests_in_flight_are_bounded_by_the_server_slots(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slots: int | None, expected: int) -> None:
    """llama-cpp-python's server (1 slot) gets one request at a time whatever llm.concurrency
    says; llama-server gets min(concurrency, slots); a hosted endpoint gets llm.concurrency."""
    from evichain.llm.cache import LLMCache

    endpoint = client_mod.Endpoint("openai/m", "http://127.0.0.1:1/v1", "none", "llama_cpp",
                                   slots=slots)
    monkeypatch.setattr(client_mod, "resolve_endpoint", lambda params: endpoint)
    client = client_mod.LLMClient(LLMParams(concurrency=4), cache=LLMCache(tmp_path / "c.sqlite"))
    assert client.concurrency() == expected
