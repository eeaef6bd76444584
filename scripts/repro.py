"""``make repro``: every recorded result again, from the recorded LLM answers, with 0 model calls.

    python -m scripts.repro [--datasets demo,musique] [--force] [--record FILE]

1. A replay cache, ``artifacts/replay/llm-cache.sqlite``, made afresh from every recording in
   ``reproduce/*.sqlite`` (``reproduce/partial/`` is not a complete recording and is left out).
2. ``dvc repro --single-item`` of the code stages (``code_<template>``: the digests of the
   source files each stage template imports) and of the stages ``dvc.lock`` records, in
   dependency order
   (``scripts/lock_check.py --recorded``;
   stages never recorded, e.g. variants still waiting for their LLM run, are not started:
   they would need the model), with ``EVICHAIN_LLM_REPLAY=1`` and ``EVICHAIN_LLM_CACHE`` on
   that cache: an answer the recordings lack fails its stage as ``replay_miss``, no model is
   started. One Prefect server serves the whole run (``scripts/prefect_session.py``).
3. Progress: one line per stage, ``[k/N] <stage> ran|unchanged  elapsed  ETA``.
4. At the end: wall time, stages run / unchanged / failed, and ``git status`` of
   ``reports/`` (a byte-identical regeneration leaves it clean). ``--record`` writes these
   figures as JSON (the recorded timing of ``make repro`` on this machine).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

from evichain.llm.cache import LLMCache
from scripts.lock_check import recorded

ROOT = Path(__file__).resolve().parents[1]
REPLAY_CACHE = Path("artifacts/replay/llm-cache.sqlite")
_RAN = re.compile(r"^Running stage '([^']+)'")
_SKIPPED = re.compile(r"^Stage '([^']+)' didn't change, skipping")


def build_replay_cache(root: Path = ROOT) -> tuple[Path, int, int]:
    """A fresh cache holding every answer of ``reproduce/*.sqlite``: (path, files, rows)."""
    path = root / REPLAY_CACHE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    cache = LLMCache(path)
    sources = sorted((root / "reproduce").glob("*.sqlite"))
    for source in sources:
        cache.merge(source)
    rows = cache.count()
    cache.close()
    return path, len(sources), rows


def code_stages(root: Path = ROOT) -> list[str]:
    """Every ``code_<template>`` and ``params_<template>`` stage of dvc.yaml (no model, ~1 s
    each): they write the code digests and params files the recorded stages depend on, so they
    run first, recorded or not (a matrix params stage by its template name: :func:`in_order`
    expands it to all its items)."""
    from scripts.dvc_deps import CODE_PREFIX, PARAMS_PREFIX
    from scripts.lock_check import load_yaml

    return [n for n in load_yaml(root / "dvc.yaml").get("stages") or {}
            if n.startswith((CODE_PREFIX, PARAMS_PREFIX))]


def in_order(targets: list[str], root: Path = ROOT) -> list[str]:
    """``targets`` with every stage after the stages it depends on (DVC's own order: a post-order
    walk of its stage graph, as ``dvc repro`` plans a run). ``--single-item`` runs targets in
    the order given, and only them: a stage never recorded is not pulled in as an upstream
    stage (the report reads whole folders that such stages write into). A target may name a
    matrix or foreach template (``params_retrieve_graph``): all its items are taken."""
    import networkx as nx
    from dvc.repo import Repo

    wanted = set(targets)
    with Repo(str(root)) as repo:
        graph = repo.index.graph
        names = {stage.addressing for stage in graph.nodes}
        order = [s.addressing for s in nx.dfs_postorder_nodes(graph)
                 if s.addressing in wanted or s.addressing.split("@")[0] in wanted]
    missing = wanted - names - {name.split("@")[0] for name in names}
    if missing:
        raise SystemExit(f"dvc.lock records stages dvc.yaml does not define: {sorted(missing)[:5]}")
    return order


def eta(done: int, total: int, elapsed: float) -> str:
    """Remaining time at the mean pace so far (unchanged stages count as steps too)."""
    if done == 0 or done >= total:
        return "-"
    return f"{elapsed / done * (total - done) / 60:.1f} min"


def stream(command: list[str], env: dict[str, str], total: int) -> tuple[int, dict[str, int]]:
    """Run ``command``, echoing its output and a progress line per stage started or skipped."""
    counts = {"ran": 0, "unchanged": 0}
    start = time.monotonic()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1)
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.write(line)
        kind = "ran" if _RAN.match(line) else "unchanged" if _SKIPPED.match(line) else None
        if kind is None:
            continue
        counts[kind] += 1
        done = counts["ran"] + counts["unchanged"]
        elapsed = time.monotonic() - start
        stage = (_RAN.match(line) or _SKIPPED.match(line)).group(1)  # type: ignore[union-attr]
        print(f"[repro {done}/{total}] {stage} {kind}  elapsed {elapsed / 60:.1f} min  "
              f"ETA {eta(done, total, elapsed)}", flush=True)
    return proc.wait(), counts


def reports_status(root: Path = ROOT) -> list[str]:
    """``git status --porcelain reports/``: result files that differ from the committed ones."""
    out = subprocess.run(["git", "status", "--porcelain", "--", "reports"], cwd=root,
                         capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="", help="only these datasets' recorded stages")
    parser.add_argument("--force", action="store_true", help="re-run even unchanged stages")
    parser.add_argument("--record", type=Path, help="write the timing and counts here (JSON)")
    args = parser.parse_args(argv)
    datasets = {d for d in args.datasets.split(",") if d} or None
    targets = in_order(code_stages(ROOT) + recorded(ROOT, datasets), ROOT)
    cache, n_files, n_rows = build_replay_cache(ROOT)
    print(f"replay cache {cache.relative_to(ROOT)}: {n_rows} recorded answers from {n_files} "
          f"files; {len(targets)} recorded stages; EVICHAIN_LLM_REPLAY=1 (no model is started)",
          flush=True)
    env = {**os.environ, "EVICHAIN_LLM_REPLAY": "1", "EVICHAIN_LLM_CACHE": str(cache)}
    dvc = ["dvc", "repro", "--single-item", *(["--force"] if args.force else []), *targets]
    start = time.monotonic()
    code, counts = stream([sys.executable, "-m", "scripts.prefect_session", "--", *dvc], env,
                          len(targets))
    wall = time.monotonic() - start
    changed = reports_status(ROOT)
    summary = {"exit_code": code, "wall_s": round(wall, 1), "stages_targeted": len(targets),
               **counts, "datasets": sorted(datasets) if datasets else "all recorded",
               "reports_changed": changed, "replay_answers": n_rows,
               "machine": f"{platform.machine()}, {os.cpu_count()} cores"}
    print(f"make repro: exit {code} in {wall / 60:.1f} min; {counts['ran']} stages ran, "
          f"{counts['unchanged']} unchanged; reports/ "
          f"{'identical to the committed files' if not changed else f'{len(changed)} files differ'}")
    if args.record:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return code


if __name__ == "__main__":
    sys.exit(main())
