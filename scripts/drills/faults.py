"""Drill 1 — injected LLM faults: the stages complete, failures are status rows, the cache holds
only valid responses, and a clean re-run calls the model only for what failed.

On a real 2Wiki slice built by the demo rules (``--questions``/``--passages``; the demo itself is
12/45), with ``EVICHAIN_FAULTS`` at ``--rate`` (timeouts, 429s, 500s and truncated JSON in equal
parts) and ``llm.max_retries`` at ``--retries``, the real stage entry points run in this process:

    retrieve (bm25) → extract_propositions (faults) → extract_propositions (clean)
    → canonicalize_entities → retrieve_evireform full (faults) → retrieve_evireform (clean)
    → read bm25 (faults) → read bm25 (clean)

Per LLM stage it counts the faults injected (by kind), the calls, the failed status rows, and
the calls of the clean re-run per item (from the drill responder's call log). The clean re-run
of extraction and reading must call the model for exactly the failed items; retrieval may also
re-call the reformulation of a question whose selection failed (its evidence changes).

    python -m scripts.drills.faults --questions 12 --passages 45 --rate 0.3 --out reports/drills/faults.json
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scripts.drills import common as c
from scripts.drills.responder import ident_of

DATASET = "demo"


def fault_spec(rate: float, seed: int) -> str:
    """``EVICHAIN_FAULTS`` with ``rate`` split equally over the four fault kinds."""
    part = rate / 4
    return (f"timeout={part:.6f},rate_limit={part:.6f},server_error={part:.6f},"
            f"malformed={part:.6f},seed={seed}")


@contextlib.contextmanager
def count_faults() -> Iterator[Counter[str]]:
    """Count the faults the client's plan injects (by kind) while the block runs."""
    from evichain.llm.faults import FaultPlan

    counts: Counter[str] = Counter()
    lock = threading.Lock()
    original = FaultPlan.draw

    def draw(self: FaultPlan, key: str, attempt: int) -> Any:
        kind = original(self, key, attempt)
        if kind:
            with lock:
                counts[kind] += 1
        return kind

    FaultPlan.draw = draw  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        FaultPlan.draw = original  # type: ignore[method-assign]


def _stage(name: str, args: list[str], work: Path, env: dict[str, str]) -> c.StageResult:
    result = c.run_inprocess(name, args, work, env)
    if result.exit_code != 0:
        raise RuntimeError(f"stage {name} {args} exited {result.exit_code}:\n{result.output[-20000:]}")
    return result


def run(work: Path, *, n_questions: int = 12, max_passages: int = 45, rate: float = 0.3,
        seed: int = 7, retries: int = 1) -> dict[str, Any]:
    """The drill in ``work`` (module docstring); returns its figures."""
    from evichain.io import read_json, read_parquet
    from evichain.paths import DatasetPaths

    corpus, questions = c.demo_slice(n_questions, max_passages)
    c.write_dataset(work, DATASET, corpus, questions)
    c.write_params(work, llm={"max_retries": retries},
                   evireform={"index": {"max_failure_rate": 1.0, "checkpoint_shard": 8}},
                   read={"max_failure_rate": 1.0})
    calls_log, cache = work / "calls.log", work / "llm.sqlite"
    env = c.drill_env(work, calls_log, cache=cache, checkpoints=work / "checkpoints")
    faulty = {**env, "EVICHAIN_FAULTS": fault_spec(rate, seed)}
    paths = DatasetPaths(DATASET, root=work / "artifacts")
    ds = ["--dataset", DATASET]
    _stage("retrieve", ds + ["--method", "bm25"], work, env)
    text_of = dict(zip(corpus["passage_id"], corpus["text"]))
    question_of = dict(zip(questions["question_id"], questions["question"]))
    out: dict[str, Any] = {"params": {"questions": len(questions), "passages": len(corpus),
                                      "fault_rate": rate, "fault_seed": seed,
                                      "max_retries": retries, "faults": fault_spec(rate, seed)}}

    # ---------------------------------------------------------------- extraction
    n0 = len(c.read_calls(calls_log))
    with count_faults() as injected:
        _stage("extract", ds, work, faulty)
    status = read_parquet(paths.index_file("extraction_status.parquet"))
    usage = read_json(paths.usage("extract_propositions"))["llm_usage"]
    failed = status.loc[status["status"] == "failed", "passage_id"].tolist()
    cached_after_faults = c.cache_count(cache, "evireform.extract")
    n1 = len(c.read_calls(calls_log))
    _stage("extract", ds, work, env)
    rerun = c.started(c.read_calls(calls_log)[n1:], "extract")
    status2 = read_parquet(paths.index_file("extraction_status.parquet"))
    failed_idents = {ident_of(text_of[p]) for p in failed}
    out["extract"] = _figures(
        items=len(status), injected=injected, usage=usage, failed_rows=len(failed),
        kinds=status.loc[status["status"] == "failed", "error_kind"].value_counts().to_dict(),
        calls_faulty=len(c.started(c.read_calls(calls_log)[n0:n1])),
        rerun_calls=len(rerun), rerun_expected=len(failed),
        repeated=sum(1 for x in rerun if x.ident not in failed_idents),
        final_failed=int((status2["status"] == "failed").sum()),
        extra={"cache_entries_after_faulty_run": cached_after_faults,
               "ok_rows_after_faulty_run": len(status) - len(failed)})
    out["extract"]["ok"] = bool(out["extract"]["ok"]
                                and cached_after_faults == len(status) - len(failed)
                                and {x.ident for x in rerun} == failed_idents)

    # ---------------------------------------------------------------- EviReform retrieval
    _stage("canonicalize", ds, work, env)
    variant = ["--variant", "full"]
    n0 = len(c.read_calls(calls_log))
    with count_faults() as injected:
        _stage("retrieve_evireform", ds + variant, work, faulty)
    trace = read_parquet(paths.trace("evireform-full"))
    usage = read_json(paths.usage("retrieve_evireform-full"))["llm_usage"]
    sel_failed = trace["selection_status"].astype(str).str.startswith("llm_")
    ref_failed = trace["reformulation_status"].astype(str).str.startswith("llm_")
    failed_q = set(trace.loc[sel_failed | ref_failed, "question_id"])
    n1 = len(c.read_calls(calls_log))
    _stage("retrieve_evireform", ds + variant, work, env)
    rerun = [x for x in c.read_calls(calls_log)[n1:] if x.phase == "S"]
    trace2 = read_parquet(paths.trace("evireform-full"))
    failed_idents = {ident_of(question_of[q]) for q in failed_q}
    steps_failed = int(sel_failed.sum() + ref_failed.sum())
    kinds = Counter(s.removeprefix("llm_") for s in list(trace.loc[sel_failed, "selection_status"])
                    + list(trace.loc[ref_failed, "reformulation_status"]))
    out["retrieve_evireform"] = _figures(
        items=len(trace), injected=injected, usage=usage, failed_rows=steps_failed, kinds=dict(kinds),
        calls_faulty=len(c.started(c.read_calls(calls_log)[n0:n1])),
        rerun_calls=len(rerun), rerun_expected=steps_failed,
        repeated=sum(1 for x in rerun if x.ident not in failed_idents),
        final_failed=int(trace2["selection_status"].astype(str).str.startswith("llm_").sum()
                         + trace2["reformulation_status"].astype(str).str.startswith("llm_").sum()),
        extra={"questions_with_a_failed_step": len(failed_q),
               "selection_failures": int(sel_failed.sum())},
        # a question whose selection failed has new evidence, hence a new reformulation call
        rerun_upper=steps_failed + int(sel_failed.sum()))

    # ---------------------------------------------------------------- QA reading
    n0 = len(c.read_calls(calls_log))
    with count_faults() as injected:
        _stage("read", ds + ["--method", "bm25"], work, faulty)
    qa = read_parquet(paths.qa("bm25"))
    usage = read_json(paths.usage("read-bm25"))
    failed = qa.loc[qa["status"] != "ok", "question_id"].tolist()
    n1 = len(c.read_calls(calls_log))
    _stage("read", ds + ["--method", "bm25"], work, env)
    rerun = c.started(c.read_calls(calls_log)[n1:], "read")
    qa2 = read_parquet(paths.qa("bm25"))
    failed_idents = {ident_of(question_of[q]) for q in failed}
    out["read"] = _figures(
        items=len(qa), injected=injected, usage=usage, failed_rows=len(failed),
        kinds=qa.loc[qa["status"] != "ok", "error_kind"].value_counts().to_dict(),
        calls_faulty=len(c.started(c.read_calls(calls_log)[n0:n1])),
        rerun_calls=len(rerun), rerun_expected=len(failed),
        repeated=sum(1 for x in rerun if x.ident not in failed_idents),
        final_failed=int((qa2["status"] != "ok").sum()))

    # ---------------------------------------------------------------- the cache
    invalid = c.invalid_cache_entries(cache)
    out["cache"] = {"entries": len(c.cache_rows(cache)), "invalid_entries": len(invalid),
                    "integrity": c.integrity(cache)}
    stages = ("extract", "retrieve_evireform", "read")
    out["totals"] = {
        "faults_injected": sum(sum(out[s]["faults_injected"].values()) for s in stages),
        "rows_failed": sum(out[s]["failed_rows"] for s in stages),
        "rerun_calls": sum(out[s]["rerun_calls"] for s in stages),
        "calls_repeated": sum(out[s]["repeated_calls"] for s in stages)}
    out["verdict"] = "pass" if (all(out[s]["ok"] for s in stages) and not invalid
                                and out["cache"]["integrity"] == "ok") else "FAIL"
    return out


def _figures(*, items: int, injected: Counter[str], usage: dict[str, Any], failed_rows: int,
             kinds: dict[str, int], calls_faulty: int, rerun_calls: int, rerun_expected: int,
             repeated: int, final_failed: int, extra: dict[str, Any] | None = None,
             rerun_upper: int | None = None) -> dict[str, Any]:
    upper = rerun_expected if rerun_upper is None else rerun_upper
    ok = (usage.get("failures", 0) == failed_rows          # every failure is a status row
          and rerun_expected <= rerun_calls <= upper      # the clean run redoes only the failed
          and repeated == 0 and final_failed == 0)
    return {"items": items, "faults_injected": dict(sorted(injected.items())),
            "calls": usage.get("calls", 0), "model_calls_logged": calls_faulty,
            "retries": usage.get("retries", 0), "repairs": usage.get("repairs", 0),
            "client_failures": usage.get("failures", 0), "failed_rows": failed_rows,
            "failure_kinds": {str(k): int(v) for k, v in sorted(kinds.items())},
            "rerun_calls": rerun_calls, "rerun_calls_expected": rerun_expected,
            "rerun_calls_upper": upper, "repeated_calls": repeated,
            "failed_after_rerun": final_failed, **(extra or {}), "ok": bool(ok)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=12)
    ap.add_argument("--passages", type=int, default=45)
    ap.add_argument("--rate", type=float, default=0.3, help="fraction of attempts that fail")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--retries", type=int, default=1, help="llm.max_retries")
    ap.add_argument("--out", type=Path, default=c.ROOT / "reports/drills/faults.json")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args(argv)
    return c.run_drill("faults", argv, args.out, args.keep, lambda work: run(
        work, n_questions=args.questions, max_passages=args.passages, rate=args.rate,
        seed=args.seed, retries=args.retries))


if __name__ == "__main__":
    sys.exit(0 if main()["verdict"] == "pass" else 1)
