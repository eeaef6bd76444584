"""A DVC stage stopped by SIGINT / SIGTERM (issue 61): ``run_stage`` ends the process within
seconds with 130 / 143 and one line saying what was kept, although task-runner threads are still
busy (without :func:`flows.stopping.interruptible` the interpreter waits for them at exit, which
is why a stage under ``dvc repro`` ignored Ctrl-C)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXIT_WITHIN_S = 10.0

BUSY_STAGE = """
import time
from concurrent.futures import ThreadPoolExecutor
from stages._common import run_stage

def body():
    pool = ThreadPoolExecutor(max_workers=2)   # like the task runner's workers
    for _ in range(4):
        pool.submit(time.sleep, 600)           # like queued LLM requests
    print("ready", flush=True)
    pool.shutdown(wait=True)

run_stage("busy@demo", body)
"""


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_a_busy_stage(signum: int, code: int) -> None:
    proc = subprocess.Popen([sys.executable, "-c", BUSY_STAGE], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        sent = time.monotonic()
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert took < EXIT_WITHIN_S
    assert f"interrupted by {signal.Signals(signum).name}" in err and "LLM cache" in err
