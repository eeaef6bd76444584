"""Drill 3 — two processes extract overlapping passages against one LLM cache.

Process A extracts passages ``[0, n)`` of the 2Wiki corpus (real text), process B ``overlap`` of
them plus ``n − overlap`` others (``--layout``: ``offset`` = A's last ``overlap`` passages come
first in B, ``same`` = A's first ones, so both race for them from the start). Both are
``python -m stages.extract_propositions`` (``extractor: llm``) with one shared
``$EVICHAIN_LLM_CACHE`` and one shared checkpoint directory (the default set-up: both live in
the user's cache directory); their first LLM calls wait for each other, so their work starts
together; ``--latency`` seconds per scripted call. Checked:

* both finish (exit 0), every passage ``ok``; the cache passes SQLite's integrity check and
  every entry parses and validates against its schema;
* duplicate work (from a log of the cache's lookups and stores in both processes): a passage
  called by both is inside the race window when the second process looked it up before the
  first one stored its answer (``--slack`` s of clock tolerance); beyond it otherwise (the
  shared cache failed). A duplicate is *avoidable* when the second model call started after
  the answer was stored (the lookup went stale while the task waited for its concurrency slot
  and in litellm's call set-up);
* the overlap's propositions are identical in A's and B's outputs, and each output is
  byte-identical to a solo run of the same corpus (always, in this script).

    python -m scripts.drills.concurrent_writers --passages 64 --overlap 32 --out reports/drills/concurrent_writers.json
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from scripts.drills import common as c
from scripts.drills.responder import ident_of

DATASET = "demo"


class _Barrier(threading.Thread):
    """Creates the responder's barrier file once both processes wait at their first call, so
    that their LLM work starts together whatever their start-up times."""

    def __init__(self, calls_log: Path, barrier: Path, timeout_s: float) -> None:
        super().__init__(daemon=True)
        self.calls_log, self.barrier, self.timeout_s = calls_log, barrier, timeout_s
        self.start()

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if len({x.pid for x in c.read_calls(self.calls_log) if x.phase == "W"}) >= 2:
                break
            time.sleep(0.02)
        self.barrier.touch()   # on time-out too: never leave a process waiting for ever


def duplicates(calls: list[c.Call], cache_events: list[c.Call], keys: dict[str, str],
               slack_s: float = 0.01) -> dict[str, Any]:
    """Passages called by both processes. ``cache_events`` is the cache log (``G`` lookups,
    ``P`` stores; ``ident`` = cache key), ``keys`` maps a paragraph ident to its cache key.

    A duplicate is *inside the race window* when the second process looked the key up (miss)
    before the first one stored its answer (+``slack_s``), *beyond* it otherwise (the cache
    failed to share a stored answer). It is *avoidable* when the second model call started
    after the answer was stored: the lookup was stale by the time the call began."""
    starts: dict[tuple[int, str], float] = {}
    for x in c.started(calls, "extract"):
        starts.setdefault((x.pid, x.ident), x.t)
    puts: dict[tuple[int, str], float] = {}
    misses: dict[tuple[int, str], float] = {}
    for e in cache_events:
        if e.phase == "P":
            puts.setdefault((e.pid, e.ident), e.t)
        elif e.phase == "G" and e.kind == "miss":
            misses.setdefault((e.pid, e.ident), e.t)
    pids_of: dict[str, set[int]] = {}
    for pid, ident in starts:
        pids_of.setdefault(ident, set()).add(pid)
    inside = beyond = avoidable = 0
    waits = []
    for ident, pids in pids_of.items():
        if len(pids) < 2:
            continue
        key = keys[ident]
        first, *others = sorted(pids, key=lambda p: puts.get((p, key), float("inf")))
        stored = puts.get((first, key), float("inf"))
        for other in others:
            if misses.get((other, key), float("-inf")) <= stored + slack_s:
                inside += 1
            else:
                beyond += 1
            if starts[(other, ident)] > stored:
                avoidable += 1
                waits.append(round(starts[(other, ident)] - stored, 3))
    return {"duplicate_calls": inside + beyond, "inside_race_window": inside,
            "beyond_race_window": beyond, "avoidable_duplicates": avoidable,
            "avoidable_started_after_store_s": sorted(waits)[:20]}


def overlap_problem(n_passages: int, overlap: int) -> str:
    """Why ``overlap`` shared passages cannot be drawn from ``n_passages`` per process ("" when
    1 ≤ overlap ≤ n_passages)."""
    if 0 < overlap <= n_passages:
        return ""
    return (f"overlap={overlap}: the shared passages must be 1..{n_passages} "
            "(the passages per process)")


def corpora_for(n_passages: int, overlap: int, layout: str) -> dict[str, Any]:
    """A = passages [0, n); B = the next n − overlap passages after the overlap, preceded by it:
    ``offset`` = B starts where the overlap starts in A (its end: A reaches it last), ``same`` =
    B starts with A's first ``overlap`` passages (both processes race for them from the start)."""
    import pandas as pd

    if problem := overlap_problem(n_passages, overlap):
        raise ValueError(problem)
    a = c.corpus_slice(n_passages, 0)
    if layout == "offset":
        return {"A": a, "B": c.corpus_slice(n_passages, n_passages - overlap)}
    b = pd.concat([a.head(overlap), c.corpus_slice(n_passages - overlap, n_passages)],
                  ignore_index=True)
    return {"A": a, "B": b}


def run(work: Path, *, n_passages: int = 16, overlap: int = 8, shard: int = 4,
        latency_s: float = 0.05, slack_s: float = 0.01, mixed: bool = False,
        reference: bool = False, layout: str = "offset", workers: int = 4,
        concurrency: int = 1, timeout_s: float = 300.0) -> dict[str, Any]:
    """The drill in ``work`` (module docstring). ``mixed``: A runs in this process (CI: one
    process start less), started once B has made its first call."""
    import pandas as pd

    corpora = corpora_for(n_passages, overlap, layout)
    cache, ckpt, calls_log = work / "llm.sqlite", work / "checkpoints", work / "calls.log"
    cache_log = work / "cache.log"
    env = {**c.drill_env(work, calls_log, cache=cache, checkpoints=ckpt, latency_s=latency_s),
           "EVICHAIN_DRILL_CACHE_LOG": str(cache_log),
           "EVICHAIN_DRILL_BARRIER": str(work / "go")}
    dirs = {}
    for name, corpus in corpora.items():
        d = dirs[name] = work / name
        d.mkdir(parents=True)
        c.write_dataset(d, DATASET, corpus)
        c.write_params(d, evireform={"index": {"checkpoint_shard": shard}},
                       llm={"concurrency": concurrency}, orchestration={"max_workers": workers})
    args = ["--dataset", DATASET]
    start = time.perf_counter()
    barrier = _Barrier(calls_log, work / "go", timeout_s)
    procs = {"B": c.start_stage("extract", args, dirs["B"], env, work / "B.log", instrument=True)}
    codes: dict[str, int] = {}
    if mixed:
        with c.patched_env({"EVICHAIN_DRILL_CACHE_LOG": str(cache_log)}):
            undo = c.install_cache_log()
        try:
            codes["A"] = c.run_inprocess("extract", args, dirs["A"], env).exit_code
        finally:
            undo()
    else:
        procs["A"] = c.start_stage("extract", args, dirs["A"], env, work / "A.log",
                                   instrument=True)
    for name, proc in procs.items():
        codes[name] = proc.wait(timeout=timeout_s)
    barrier.join()
    seconds = time.perf_counter() - start

    calls = c.read_calls(calls_log)
    union = {ident_of(t) for corpus in corpora.values() for t in corpus["text"]}
    props = {n: pd.read_parquet(d / "artifacts" / DATASET / "index" / "propositions.parquet")
             for n, d in dirs.items() if codes[n] == 0}
    status = {n: pd.read_parquet(d / "artifacts" / DATASET / "index" / "extraction_status.parquet")
              for n, d in dirs.items() if codes[n] == 0}
    shared = set(corpora["A"]["passage_id"]) & set(corpora["B"]["passage_id"])
    same_overlap = (len(props) == 2 and props["A"][props["A"]["passage_id"].isin(shared)]
                    .reset_index(drop=True).equals(props["B"][props["B"]["passage_id"].isin(shared)]
                                                   .reset_index(drop=True)))
    keys = c.extraction_cache_keys(sorted({t for corpus in corpora.values()
                                           for t in corpus["text"]}))
    stored = {k for k, _, _ in c.cache_rows(cache)}
    if set(keys.values()) != stored:
        raise RuntimeError("the drill's cache keys differ from the client's: cannot join the logs")
    dup = duplicates(calls, c.read_calls(cache_log), keys, slack_s)
    out: dict[str, Any] = {
        "params": {"passages_per_process": n_passages, "overlap": overlap, "checkpoint_shard": shard,
                   "latency_s": latency_s, "slack_s": slack_s, "mixed": mixed, "layout": layout,
                   "orchestration.max_workers": workers, "llm.concurrency": concurrency},
        "exit_codes": codes, "seconds": round(seconds, 2),
        "distinct_passages": len(union), "calls_total": len(c.started(calls, "extract")),
        "calls_by_process": sorted(Counter(x.pid for x in c.started(calls, "extract")).values()),
        **dup,
        "all_ok": all(bool((s["status"] == "ok").all()) for s in status.values()) and len(status) == 2,
        "cache_hits_from_other_process": {n: int(s["cached"].sum()) for n, s in status.items()
                                          if "cached" in s},
        "overlap_propositions_identical": bool(same_overlap),
        "cache_entries": c.cache_count(cache), "cache_integrity": c.integrity(cache),
        "invalid_cache_entries": len(c.invalid_cache_entries(cache)),
        "temp_files_left": sorted(p.name for p in work.rglob(".*.tmp")),
    }
    if reference:
        out["identical_to_solo_run"] = _compare_solo(work, dirs, corpora, shard)
    out["verdict"] = "pass" if (all(v == 0 for v in codes.values()) and out["all_ok"]
                                and out["cache_integrity"] == "ok"
                                and out["invalid_cache_entries"] == 0
                                and out["cache_entries"] == len(union)
                                and dup["beyond_race_window"] == 0 and same_overlap
                                and all(out.get("identical_to_solo_run", {"-": True}).values())
                                ) else "FAIL"
    return out


def _compare_solo(work: Path, dirs: dict[str, Path], corpora: dict[str, Any], shard: int
                  ) -> dict[str, bool]:
    """propositions.parquet of each process == that of a solo run (own fresh cache)."""
    out = {}
    for name, corpus in corpora.items():
        solo = work / f"solo-{name}"
        solo.mkdir()
        c.write_dataset(solo, DATASET, corpus)
        c.write_params(solo, evireform={"index": {"checkpoint_shard": shard}})
        env = c.drill_env(solo, solo / "calls.log", cache=solo / "llm.sqlite",
                          checkpoints=solo / "checkpoints")
        if c.run_inprocess("extract", ["--dataset", DATASET], solo, env).exit_code != 0:
            out[name] = False
            continue
        rel = Path("artifacts") / DATASET / "index" / "propositions.parquet"
        out[name] = (solo / rel).read_bytes() == (dirs[name] / rel).read_bytes()
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passages", type=int, default=64, help="passages per process")
    ap.add_argument("--overlap", type=int, default=32)
    ap.add_argument("--shard", type=int, default=8, help="evireform.index.checkpoint_shard")
    ap.add_argument("--latency", type=float, default=0.05, help="seconds per scripted LLM call")
    ap.add_argument("--slack", type=float, default=0.01, help="race-window slack, seconds")
    ap.add_argument("--workers", type=int, default=4, help="orchestration.max_workers")
    ap.add_argument("--concurrency", type=int, default=1, help="llm.concurrency")
    ap.add_argument("--layout", choices=("offset", "same"), default="offset",
                    help="offset: B's overlap is A's end; same: both start on the overlap")
    ap.add_argument("--out", type=Path, default=c.ROOT / "reports/drills/concurrent_writers.json")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args(argv)
    if problem := overlap_problem(args.passages, args.overlap):
        ap.error(problem)
    return c.run_drill("concurrent_writers", argv, args.out, args.keep, lambda work: run(
        work, n_passages=args.passages, overlap=args.overlap, shard=args.shard,
        latency_s=args.latency, slack_s=args.slack, reference=True, layout=args.layout,
        workers=args.workers, concurrency=args.concurrency))


if __name__ == "__main__":
    sys.exit(0 if main()["verdict"] == "pass" else 1)
