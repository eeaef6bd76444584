#!/usr/bin/env python
"""llama-server under CPU contention: generation threads (``-t``) and thread polling (``--poll``).

Starts ``llama-server`` (the binary ``scripts/setup_local_llm.sh`` builds) with 4 slots for each
setting in turn and sends 4 concurrent chat requests (120 generated tokens each, temperature 0,
no grammar); prints the generated tokens per second of the 4 together. Run it on a machine that
is as busy as the one the pipeline will share (the load average is printed), since the point is
how llama.cpp's worker threads behave when a core is taken by another process: they wait for
each other at every step, so one descheduled thread stalls them all.

    .venv/bin/python -m benchmarks.bench_llama_server_threads --threads 1 2
    .venv/bin/python -m benchmarks.bench_llama_server_threads --threads 2 --poll 0 50
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from evichain.llm.local_model import ensure_gguf
from evichain.llm.local_server import _free_port, llama_server_binary

TOPICS = ("Paris", "Rome", "Oslo", "Lima")


def serve(threads: int, poll: int | None, port: int) -> subprocess.Popen[bytes]:
    """``llama-server`` with 4 slots of 2,048 tokens on ``port``, ready to answer."""
    cmd = [str(llama_server_binary()), "-m", str(ensure_gguf("qwen2.5-coder-1.5b")),
           "--port", str(port), "-c", "8192", "-np", "4", "--no-kv-unified", "-t", str(threads),
           "-tb", str(threads), "--no-webui", *(["--poll", str(poll)] if poll is not None else [])]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(240):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("llama-server did not start within 120 s")


def one(port: int, topic: str) -> int:
    """Generated tokens of one request."""
    body = json.dumps({"messages": [{"role": "user", "content":
                                     f"List 12 facts about {topic} as a JSON list."}],
                       "max_tokens": 120, "temperature": 0}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=900) as resp:
        return int(json.load(resp)["usage"]["completion_tokens"])


def measure(threads: int, poll: int | None) -> str:
    """One line: setting, tokens, wall seconds, tokens/s, load average before."""
    port = _free_port("127.0.0.1")
    load = os.getloadavg()[0]
    proc = serve(threads, poll, port)
    try:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(len(TOPICS)) as pool:
            tokens = sum(pool.map(lambda t: one(port, t), TOPICS))
        wall = time.perf_counter() - t0
    finally:
        proc.kill()
        proc.wait()
    poll_text = "default" if poll is None else str(poll)
    return (f"threads {threads}, poll {poll_text}: 4 concurrent, {tokens} tokens in {wall:.1f}s = "
            f"{tokens / wall:.1f} tok/s (1-min load average before: {load:.2f})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--poll", nargs="+", type=int, default=None)
    args = ap.parse_args(argv)
    for threads in args.threads:
        for poll in args.poll or [None]:
            print(measure(threads, poll), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
