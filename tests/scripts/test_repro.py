"""``make repro``'s driver (scripts/repro.py), the one-server wrapper (scripts/prefect_session.py)
and the summary at the end of a make target (scripts/results_summary.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from evichain.llm.cache import CachedResponse, LLMCache
from scripts import prefect_session, repro, results_summary

ROOT = Path(__file__).resolve().parents[2]


def _recording(path: Path, keys: list[str]) -> None:
    cache = LLMCache(path)
    for key in keys:
        cache.put(key, model="m", prompt="p", response=CachedResponse(
            content=key, prompt_tokens=1, completion_tokens=1, cost_usd=0.0))
    cache.close()


def test_replay_cache_is_made_afresh_from_every_complete_recording(tmp_path: Path) -> None:
    (tmp_path / "reproduce" / "partial").mkdir(parents=True)
    _recording(tmp_path / "reproduce" / "a-llm-cache.sqlite", ["k1", "k2"])
    _recording(tmp_path / "reproduce" / "b-llm-cache.sqlite", ["k2", "k3"])
    _recording(tmp_path / "reproduce" / "partial" / "c-llm-cache.sqlite", ["k4"])
    stale = tmp_path / repro.REPLAY_CACHE
    stale.parent.mkdir(parents=True)
    _recording(stale, ["old"])  # a previous replay cache is not kept
    path, files, rows = repro.build_replay_cache(tmp_path)
    assert (files, rows) == (2, 3)
    assert LLMCache(path).keys() == {"k1", "k2", "k3"}


def test_progress_lines_count_stages_run_and_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    script = ("print(\"Running stage 'prepare@demo':\"); print('> python -m stages.prepare');"
              "print(\"Stage 'retrieve_bm25@demo' didn't change, skipping\");"
              "print(\"Running stage 'report':\"); raise SystemExit(3)")
    code, counts = repro.stream([sys.executable, "-c", script], dict(os.environ), total=3)
    out = capsys.readouterr().out
    assert code == 3 and counts == {"ran": 2, "unchanged": 1}
    assert "[repro 1/3] prepare@demo ran" in out and "[repro 2/3] retrieve_bm25@demo unchanged" in out
    assert "[repro 3/3] report ran" in out and "ETA -" in out


def test_eta_is_the_mean_pace_so_far() -> None:
    assert repro.eta(0, 10, 5.0) == "-" and repro.eta(10, 10, 60.0) == "-"
    assert repro.eta(2, 6, 120.0) == "4.0 min"


def test_session_runs_against_a_given_server_without_starting_one(tmp_path: Path) -> None:
    env = {**os.environ, "PREFECT_API_URL": "http://127.0.0.1:9/api"}
    out = subprocess.run(
        [sys.executable, "-m", "scripts.prefect_session", "--", sys.executable, "-c",
         "import os, sys; print(os.environ['PREFECT_API_URL']); sys.exit(4)"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 4 and out.stdout.strip() == "http://127.0.0.1:9/api"


def test_session_starts_one_server_for_the_command_and_stops_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")  # its own database
    probe = ("import os, urllib.request; url = os.environ['PREFECT_API_URL'];"
             "print(url); print(urllib.request.urlopen(url + '/health', timeout=5).status)")
    out = subprocess.run([sys.executable, "-m", "scripts.prefect_session", "--", sys.executable,
                          "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("Prefect server for this run: UI http://127.0.0.1:")
    url, status = lines[-2], lines[-1]
    assert status == "200"
    with pytest.raises(OSError):  # stopped when the command ended
        urllib.request.urlopen(url + "/health", timeout=5)


def test_session_refuses_no_command() -> None:
    with pytest.raises(SystemExit):
        prefect_session.main(["--"])


def test_summary_names_where_the_results_are(tmp_path: Path) -> None:
    metrics = tmp_path / "reports" / "metrics" / "demo"
    metrics.mkdir(parents=True)
    (metrics / "bm25.json").write_text(json.dumps(
        {"Recall@5": 0.9375, "Chain@5": 0.75, "Recall@10": 1.0, "n_questions": 4}))
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    text = results_summary.summary("demo", tmp_path)
    assert "reports/README.md" in text and "reports/datasets/demo.md" in text
    assert "BM25: R@5 93.75, Chain@5 75.00, R@10 100.00 (n = 4 questions)" in text
    assert "EviReform full: no metrics yet" in text
    assert "git status: 1 changed files" in text  # the untracked reports/ folder


@pytest.mark.parametrize("started_ignoring_sigint", [False, True])
def test_a_signal_to_the_session_reaches_the_whole_command(tmp_path: Path,
                                                           started_ignoring_sigint: bool) -> None:
    """As a terminal's Ctrl-C reaches dvc and the stage it runs: the grandchild stops too, also
    when the session was started with SIGINT ignored (``make repro &`` in a script)."""
    import signal
    import time

    def ignore_sigint() -> None:  # what a non-interactive shell does to `cmd &`
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    marker = tmp_path / "grandchild.pid"
    inner = f"import os, time; open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(300)"
    # Popen().wait(), not run(): run() kills its child on KeyboardInterrupt itself
    outer = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {inner!r}]).wait()"
    env = {**os.environ, "PREFECT_API_URL": "http://127.0.0.1:9/api"}  # no server started
    proc = subprocess.Popen([sys.executable, "-m", "scripts.prefect_session", "--", sys.executable,
                             "-c", outer], cwd=ROOT, env=env,
                            preexec_fn=ignore_sigint if started_ignoring_sigint else None)
    deadline = time.monotonic() + 60
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    grandchild = int(marker.read_text())
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) != 0  # generous on a loaded machine; the grandchild sleeps 300 s
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(grandchild, 0)
