"""Drill 2 — kill -9 the extraction stage at random points, re-run, and count.

``python -m stages.extract_propositions`` (``extractor: llm``, the drill responder with
``--latency`` seconds per call) runs as a subprocess in its own process group; after a seeded
random number of finished LLM calls the whole group gets SIGKILL (``--kills`` times, each
re-run killed again), then a last run completes. Checked:

* no stage output exists after a kill (nothing half-written);
* the completing run calls the model exactly for the passages not in the LLM cache at its
  start (= not finished before the kills), so calls repeated = calls in flight at a kill;
* its ``propositions.parquet`` and ``extraction_status.parquet`` are byte-identical to an
  uninterrupted run's (same params, fresh cache).

    python -m scripts.drills.crash_resume --passages 120 --kills 3 --out reports/drills/crash_resume.json
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

from scripts.drills import common as c

DATASET = "demo"
OUTPUTS = ("propositions.parquet", "extraction_status.parquet")


def _setup(work: Path, corpus: Any, shard: int) -> None:
    c.write_dataset(work, DATASET, corpus)
    c.write_params(work, evireform={"index": {"checkpoint_shard": shard}})


def _outputs(work: Path) -> list[Path]:
    return [work / "artifacts" / DATASET / "index" / name for name in OUTPUTS]


def _checkpointed(ckpt: Path) -> int:
    """Passages with an ``ok`` row in the shard checkpoints on disk."""
    import json

    n = 0
    for f in ckpt.glob("*.json"):
        try:
            n += sum(o["status"].get("status") == "ok" for o in json.loads(f.read_text())["outcomes"])
        except (OSError, ValueError, KeyError):
            continue
    return n


class _Killer(threading.Thread):
    """Starts the stage, then SIGKILLs its process group once ``n_calls`` more LLM calls have
    finished (a thread, so that this process can work meanwhile)."""

    def __init__(self, work: Path, env: dict[str, str], calls_log: Path, n_calls: int,
                 timeout_s: float) -> None:
        super().__init__(daemon=True)
        self.calls_log, self.n_calls, self.timeout_s = calls_log, n_calls, timeout_s
        self.before = len(c.finished(c.read_calls(calls_log)))
        self.proc = c.start_stage("extract", ["--dataset", DATASET], work, env,
                                  work / f"stage-{time.time_ns()}.log")
        self.info: dict[str, Any] = {}
        self.error: Exception | None = None
        self.start()

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        try:
            while True:
                done = len(c.finished(c.read_calls(self.calls_log))) - self.before
                if done >= self.n_calls:
                    break
                if self.proc.poll() is not None:
                    raise RuntimeError(f"the stage ended (exit {self.proc.returncode}) before "
                                       f"{self.n_calls} calls")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"fewer than {self.n_calls} calls after {self.timeout_s} s")
                time.sleep(0.01)
            self.info = {"killed_after_finished_calls": done}
        except Exception as exc:  # noqa: BLE001 - reported by result()
            self.error = exc
        finally:
            c.kill_group(self.proc)
            self.info["exit"] = self.proc.returncode

    def result(self) -> dict[str, Any]:
        self.join()
        if self.error is not None:
            raise self.error
        return self.info


def run(work: Path, *, n_passages: int = 24, shard: int = 4, latency_s: float = 0.1,
        kills: int = 1, seed: int = 11, rerun_subprocess: bool = True,
        corpus: Any = None, timeout_s: float = 300.0) -> dict[str, Any]:
    """The drill in ``work`` (module docstring); returns its figures."""
    corpus = (c.corpus_slice(n_passages) if corpus is None else corpus).head(n_passages)
    corpus = corpus.reset_index(drop=True)
    n = len(corpus)
    rng = random.Random(seed)

    ref, crash = work / "reference", work / "crash"
    for d in (ref, crash):
        d.mkdir(parents=True)
        _setup(d, corpus, shard)
    calls_log, cache, ckpt = crash / "calls.log", crash / "llm.sqlite", crash / "checkpoints"
    env = c.drill_env(crash, calls_log, cache=cache, checkpoints=ckpt, latency_s=latency_s)
    targets = []
    killer = None
    if kills:  # the first doomed run starts now; the uninterrupted run goes on meanwhile
        targets.append(rng.randint(1, max(1, n - 2)))
        killer = _Killer(crash, env, calls_log, targets[0], timeout_s)
    ref_env = c.drill_env(ref, ref / "calls.log", cache=ref / "llm.sqlite",
                          checkpoints=ref / "checkpoints")
    result = c.run_inprocess("extract", ["--dataset", DATASET], ref, ref_env)
    if result.exit_code != 0:
        raise RuntimeError(f"reference run failed:\n{result.output[-3000:]}")
    reference = c.file_bytes(_outputs(ref))

    out: dict[str, Any] = {"params": {"passages": n, "checkpoint_shard": shard,
                                      "latency_s": latency_s, "kills": kills, "seed": seed},
                           "kills": []}
    for k in range(kills):
        if k:
            remaining = n - c.cache_count(cache, "evireform.extract")
            targets.append(rng.randint(1, max(1, remaining // 2)))  # leave work for the last run
            killer = _Killer(crash, env, calls_log, targets[k], timeout_s)
        assert killer is not None
        info = killer.result()
        target = targets[k]
        info.update({"target_calls": target,
                     "calls_started_so_far": len(c.started(c.read_calls(calls_log))),
                     "cached_passages": c.cache_count(cache, "evireform.extract"),
                     "checkpointed_passages": _checkpointed(ckpt),
                     "stage_outputs_present": [p.name for p in _outputs(crash) if p.exists()],
                     "temp_files_left": sorted(p.name for p in crash.rglob(".*.tmp"))})
        out["kills"].append(info)

    cached_before = c.cache_count(cache, "evireform.extract")
    n_before = len(c.read_calls(calls_log))
    if rerun_subprocess:
        proc = c.start_stage("extract", ["--dataset", DATASET], crash,
                             {**env, "EVICHAIN_DRILL_LATENCY_S": "0"}, crash / "rerun.log")
        code = proc.wait(timeout=timeout_s)
    else:
        code = c.run_inprocess("extract", ["--dataset", DATASET], crash,
                               {**env, "EVICHAIN_DRILL_LATENCY_S": "0"}).exit_code
    calls = c.read_calls(calls_log)
    rerun_calls = len(c.started(calls[n_before:]))
    total = len(c.started(calls))
    final = c.file_bytes(_outputs(crash)) if code == 0 else {}
    identical = {name: final.get(name) == reference[name] for name in OUTPUTS}
    out.update({
        "rerun_exit": code, "cached_before_rerun": cached_before,
        "rerun_calls": rerun_calls, "rerun_calls_expected": n - cached_before,
        "calls_total": total, "calls_repeated": total - n,
        "outputs_identical": identical,
        "status_differences": _status_differences(ref, crash) if code == 0 else {},
        "invalid_cache_entries": len(c.invalid_cache_entries(cache)),
        "cache_integrity": c.integrity(cache)})
    out["verdict"] = "pass" if (code == 0 and rerun_calls == n - cached_before
                                and all(identical.values())
                                and not any(k["stage_outputs_present"] for k in out["kills"])
                                and out["invalid_cache_entries"] == 0) else "FAIL"
    return out


def _status_differences(ref: Path, crash: Path) -> dict[str, int]:
    """Columns of the status table that differ from the uninterrupted run (rows differing)."""
    import pandas as pd

    a = pd.read_parquet(ref / "artifacts" / DATASET / "index" / "extraction_status.parquet")
    b = pd.read_parquet(crash / "artifacts" / DATASET / "index" / "extraction_status.parquet")
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        return {"<shape>": 1}
    return {col: int((a[col].astype(str) != b[col].astype(str)).sum())
            for col in a.columns if not a[col].astype(str).equals(b[col].astype(str))}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passages", type=int, default=120)
    ap.add_argument("--shard", type=int, default=16, help="evireform.index.checkpoint_shard")
    ap.add_argument("--latency", type=float, default=0.05, help="seconds per scripted LLM call")
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--out", type=Path, default=c.ROOT / "reports/drills/crash_resume.json")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args(argv)
    return c.run_drill("crash_resume", argv, args.out, args.keep, lambda work: run(
        work, n_passages=args.passages, shard=args.shard, latency_s=args.latency,
        kills=args.kills, seed=args.seed))


if __name__ == "__main__":
    sys.exit(0 if main()["verdict"] == "pass" else 1)
