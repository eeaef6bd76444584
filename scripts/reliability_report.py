"""Run the reliability drills at a larger scale than CI and write ``reports/reliability.md``.

Drills (``scripts/drills``; CI-scale versions are ``tests/test_reliability_*.py``):

1. faults — 30 % injected LLM faults in extraction, EviReform retrieval and QA reading;
2. crash_resume — kill -9 of the extraction stage at seeded random points, then resume;
3. concurrent_writers — two extraction processes over overlapping passages, one LLM cache;
4. bad_input — malformed / hostile input, each case a real stage subprocess.

All use the scripted LLM (``scripts/drills/responder.py``), never a real model. One temporary
Prefect server serves every stage run. Each drill's figures are also written as JSON under
``reports/drills/``. Runtime on the 2-core reference machine: a few minutes.

    python -m scripts.reliability_report [--quick]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scripts.drills import bad_input, concurrent_writers, crash_resume, faults
from scripts.drills import common as c

REPORT = c.ROOT / "reports" / "reliability.md"
DRILLS_DIR = c.ROOT / "reports" / "drills"


def _save(name: str, result: dict[str, Any], command: str) -> dict[str, Any]:
    result["command"] = command
    DRILLS_DIR.mkdir(parents=True, exist_ok=True)
    (DRILLS_DIR / f"{name}.json").write_text(json.dumps(result, indent=2, sort_keys=True,
                                                        default=str) + "\n", encoding="utf-8")
    return result


def run_all(work: Path, quick: bool) -> list[dict[str, Any]]:
    """Every drill; returns report rows (one per drill run) with their detail."""
    rows: list[dict[str, Any]] = []

    # 1. faults: the demo (12 questions, 45 passages), then a larger slice with more retries
    for q, p, retries, seed in ([(12, 45, 1, 7)] if quick else [(12, 45, 1, 7), (40, 160, 2, 8)]):
        start = time.perf_counter()
        res = faults.run(work / f"faults-{q}-{p}", n_questions=q, max_passages=p, rate=0.3,
                         seed=seed, retries=retries)
        res["seconds"] = round(time.perf_counter() - start, 1)
        name = "faults" if (q, p) == (12, 45) else f"faults-{q}q-{p}p"
        cmd = (f"python -m scripts.drills.faults --questions {q} --passages {p} --rate 0.3 "
               f"--seed {seed} --retries {retries}")
        _save(name, res, cmd)
        t = res["totals"]
        stages = ("extract", "retrieve_evireform", "read")
        rows.append({
            "drill": f"faults: 30 % of LLM attempts, max_retries {retries}, {q} questions / "
                     f"{p} passages",
            "faults": t["faults_injected"],
            "survived": "3/3 stages completed; " + ", ".join(
                f"{s}: {res[s]['failed_rows']} failed of {res[s]['items']}" for s in stages),
            "rows_failed": t["rows_failed"],
            "repeated": f"{t['calls_repeated']} (clean re-run: {t['rerun_calls']} calls for "
                        f"{t['rows_failed']} failures)",
            "verdict": res["verdict"], "reasons": _fault_reasons(res), "command": cmd,
            "detail": res})

    # 2. crash and resume
    n, kills = (48, 2) if quick else (120, 3)
    start = time.perf_counter()
    res = crash_resume.run(work / "crash", n_passages=n, shard=16, latency_s=0.05, kills=kills,
                           seed=11, rerun_subprocess=True)
    res["seconds"] = round(time.perf_counter() - start, 1)
    cmd = f"python -m scripts.drills.crash_resume --passages {n} --shard 16 --latency 0.05 --kills {kills}"
    _save("crash_resume", res, cmd)
    reasons = []
    if not res["outputs_identical"]["extraction_status.parquet"]:
        reasons.append("extraction_status.parquet differs from the uninterrupted run in "
                       + ", ".join(f"`{k}` ({v} rows)" for k, v in res["status_differences"].items())
                       + " — bug in evichain/methods/evireform/extract.py")
    if res["rerun_calls"] != res["rerun_calls_expected"]:
        reasons.append(f"re-run made {res['rerun_calls']} calls, {res['rerun_calls_expected']} expected")
    rows.append({
        "drill": f"crash/resume: kill -9 ×{kills} of extract_propositions ({n} passages)",
        "faults": f"{kills} × SIGKILL",
        "survived": f"resumed (exit {res['rerun_exit']}); re-run calls {res['rerun_calls']} = "
                    f"unfinished {res['rerun_calls_expected']}; propositions.parquet identical: "
                    f"{res['outputs_identical']['propositions.parquet']}",
        "rows_failed": 0,
        "repeated": f"{res['calls_repeated']} (in flight at the kills)",
        "verdict": res["verdict"], "reasons": reasons, "command": cmd, "detail": res})

    # 3. concurrent writers: offset layout (shared work), then both racing from the start
    n, overlap = (32, 16) if quick else (64, 32)
    for layout, workers, conc in (("offset", 4, 1), ("same", 4, 1), ("same", 2, 2)):
        start = time.perf_counter()
        res = concurrent_writers.run(work / f"concurrent-{layout}-{workers}-{conc}", n_passages=n,
                                     overlap=overlap, shard=8, latency_s=0.05, reference=True,
                                     layout=layout, workers=workers, concurrency=conc)
        res["seconds"] = round(time.perf_counter() - start, 1)
        cmd = (f"python -m scripts.drills.concurrent_writers --passages {n} --overlap {overlap} "
               f"--shard 8 --latency 0.05 --layout {layout} --workers {workers} --concurrency {conc}")
        _save(f"concurrent_writers-{layout}-w{workers}c{conc}", res, cmd)
        reasons = []
        if res["beyond_race_window"]:
            reasons.append(f"{res['beyond_race_window']} duplicate calls looked the passage up after "
                           "the other process had stored it: the shared cache did not share it")
        notes = []
        if res["avoidable_duplicates"]:
            notes.append(f"{res['avoidable_duplicates']} duplicates were avoidable: the model call "
                         "began after the other process had stored the answer (delays "
                         f"{res['avoidable_started_after_store_s'][:5]} s): LLMClient.call looks "
                         "the cache up before waiting for its llm.concurrency slot and does not "
                         "look again (bug in evichain/llm/client.py)")
        rows.append({
            "drill": f"concurrent writers: 2 processes × {n} passages, {overlap} shared, layout "
                     f"{layout}, max_workers {workers}, llm.concurrency {conc}",
            "faults": "2 writers, 1 cache",
            "survived": f"exit {res['exit_codes']['A']}/{res['exit_codes']['B']}; cache "
                        f"{res['cache_integrity']}, {res['cache_entries']} entries for "
                        f"{res['distinct_passages']} passages, {res['invalid_cache_entries']} invalid",
            "rows_failed": 0 if res["all_ok"] else "some",
            "repeated": f"{res['duplicate_calls']} ({res['inside_race_window']} in the race window, "
                        f"{res['beyond_race_window']} beyond; {res['avoidable_duplicates']} avoidable)",
            "verdict": res["verdict"] + (" (see note)" if notes else ""), "reasons": reasons,
            "notes": notes, "command": cmd, "detail": res})

    # 4. bad input, every case as a real stage subprocess
    start = time.perf_counter()
    cases = []
    for k, case in enumerate(bad_input.CASES.values()):
        d = work / f"bad{k}"
        d.mkdir()
        cases.append(bad_input.run_subprocess(case, d))
    res = {"cases": cases, "verdict": "pass" if all(x["ok"] for x in cases) else "FAIL",
           "seconds": round(time.perf_counter() - start, 1)}
    cmd = "python -m scripts.drills.bad_input"
    _save("bad_input", res, cmd)
    rows.append({
        "drill": f"bad input: {len(cases)} cases, each a stage subprocess",
        "faults": f"{len(cases)} bad inputs",
        "survived": f"{sum(x['ok'] for x in cases)}/{len(cases)} stopped with one clear error line",
        "rows_failed": "n/a", "repeated": "n/a", "verdict": res["verdict"],
        "reasons": [f"{x['case']}: {x['error_line'] or 'no error line'}" for x in cases if not x["ok"]],
        "command": cmd, "detail": res})
    return rows


def _fault_reasons(res: dict[str, Any]) -> list[str]:
    out = []
    for s in ("extract", "retrieve_evireform", "read"):
        f = res[s]
        if f["client_failures"] != f["failed_rows"]:
            out.append(f"{s}: {f['client_failures']} client failures but {f['failed_rows']} status rows")
        if not f["rerun_calls_expected"] <= f["rerun_calls"] <= f["rerun_calls_upper"]:
            out.append(f"{s}: clean re-run made {f['rerun_calls']} calls")
        if f["repeated_calls"]:
            out.append(f"{s}: {f['repeated_calls']} calls for items that had succeeded")
    if res["cache"]["invalid_entries"]:
        out.append(f"{res['cache']['invalid_entries']} invalid cache entries")
    return out


def markdown(rows: list[dict[str, Any]], seconds: float, command: str) -> str:
    lines = ["# Reliability drills", "",
             f"Generated by `{command}` ({seconds:.0f} s). The scripted LLM "
             "(`scripts/drills/responder.py`) stands in for the model; every stage is the real "
             "entry point. CI runs the same drills at a smaller scale: "
             "`pytest tests/test_reliability_*.py`. Figures per run: `reports/drills/*.json`.", "",
             "| drill | faults injected | survived | rows failed | calls repeated | verdict |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['drill']} | {r['faults']} | {r['survived']} | {r['rows_failed']} | "
                     f"{r['repeated']} | {r['verdict']} |")
    lines += ["", "## Definitions", "",
              "- *faults injected*: fault draws of `EVICHAIN_FAULTS` (timeouts, 429s, 500s, "
              "truncated JSON) over all attempts, repairs included; SIGKILLs; writers.",
              "- *rows failed*: status rows with `failed` (extraction, reading) or a failed LLM "
              "step in the EviReform trace, after `llm.max_retries` and one repair; each equals "
              "the client's failure count.",
              "- *calls repeated*: model calls for an item whose answer had already been obtained "
              "(faults: calls of the clean re-run for items that had succeeded; crash: calls "
              "started before a kill whose answer never reached the cache; concurrent: passages "
              "called by both processes — inside the race window when the second process looked "
              "the passage up in the cache before the first one stored it; avoidable when its "
              "model call nevertheless began after the store).", ""]
    lines += ["## Details", ""]
    for r in rows:
        lines.append(f"### {r['drill']}")
        lines.append("")
        lines.append(f"Command: `{r['command']}`")
        lines.append("")
        if r["reasons"]:
            lines.append("Why not pass:")
            lines += [f"- {reason}" for reason in r["reasons"]]
            lines.append("")
        if r.get("notes"):
            lines.append("Note:")
            lines += [f"- {note}" for note in r["notes"]]
            lines.append("")
        d = r["detail"]
        if "cases" in d:
            lines += ["| case | stage | exit | s | error line |", "|---|---|---|---|---|"]
            for x in d["cases"]:
                err = x["error_line"].replace("|", "\\|")
                lines.append(f"| {x['case']} | {x['stage']} | {x['exit']} | {x['seconds']} | "
                             f"{err} |")
        else:
            lines += ["```json", json.dumps({k: v for k, v in d.items() if k != "command"},
                                            indent=1, sort_keys=True, default=str), "```"]
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller scale (about half the time)")
    ap.add_argument("--out", type=Path, default=REPORT)
    args = ap.parse_args(argv)
    command = "python -m scripts.reliability_report" + (" --quick" if args.quick else "")
    work = Path(tempfile.mkdtemp(prefix="reliability-"))
    start = time.perf_counter()
    try:
        with c.prefect_backend():
            rows = run_all(work, args.quick)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = markdown(rows, time.perf_counter() - start, command)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text.split("## Definitions")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
