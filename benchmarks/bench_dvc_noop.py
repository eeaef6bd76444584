#!/usr/bin/env python
"""How long DVC takes to find nothing to do: ``dvc status`` and a no-op ``dvc repro`` of the
whole pipeline (issue 61: targets 10 s and 20 s).

Both need a lock that records every stage as up to date, which no machine here has (a full
``make repro`` takes hours). So the bench builds one in a scratch copy of the repository:

1. the committed files (``git ls-files``) are copied to a temporary folder, with ``dvc.yaml``
   replaced by ``--dvc-yaml`` when given (to time another layout of the same pipeline);
2. every stage output that is missing (everything under ``artifacts/``) becomes a small
   placeholder file (a folder with one file, for outputs without a suffix), and the code
   digests are written by ``stages/code_digest.py``'s own functions;
3. every stage is saved and committed through DVC's API (hashes of deps, params, outputs) and the
   lock is written once: the state a finished ``dvc repro`` leaves.

Then ``dvc status`` and ``dvc repro`` (which must report every stage unchanged) are timed,
``--repeats`` times each after one warm-up. Results: one JSON line per run appended to
``benchmarks/results/dvc_noop.jsonl``.

    .venv/bin/python -m benchmarks.bench_dvc_noop [--dvc-yaml OTHER] [--label L] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DVC = str(Path(sys.executable).with_name("dvc"))


def scratch_copy(dest: Path, dvc_yaml: Path | None) -> None:
    """The committed files of the repository (and ``.dvc/config``) under ``dest``."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    if dvc_yaml is not None:
        shutil.copy2(dvc_yaml, dest / "dvc.yaml")
    (dest / "dvc.lock").unlink(missing_ok=True)


def placeholders(dest: Path) -> tuple[int, int]:
    """A placeholder for every missing output of every stage. Returns (stages, placeholders
    made)."""
    from dvc.repo import Repo

    made = 0
    with Repo(str(dest)) as repo:
        stages = [s for s in repo.index.stages if s.cmd]
        for stage in stages:
            for out in stage.outs:
                path = Path(out.fs_path)
                if path.exists():
                    continue
                if path.suffix:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(f"placeholder for {stage.addressing}\n")
                else:
                    path.mkdir(parents=True, exist_ok=True)
                    (path / "placeholder").write_text(f"placeholder for {stage.addressing}\n")
                made += 1
    return len(stages), made


def record_every_stage(dest: Path) -> int:
    """Save and commit every stage through DVC's API and write the lock once; lock lines."""
    from dvc.repo import Repo
    from dvc.stage.serialize import to_lockfile
    from dvc.utils.serialize import dump_yaml

    with Repo(str(dest)) as repo, repo.lock:
        lock: dict[str, Any] = {"schema": "2.0", "stages": {}}
        for stage in repo.index.stages:
            if not stage.cmd:
                continue
            stage.save(run_cache=False)
            stage.commit()
            lock["stages"].update(to_lockfile(stage))
        dump_yaml(str(dest / "dvc.lock"), lock)
    return len((dest / "dvc.lock").read_text().splitlines())


def code_digests(dest: Path) -> int:
    """Write every ``pipeline/code/<template>.md5`` the scratch ``dvc.yaml`` asks for."""
    if not (dest / "stages" / "code_digest.py").is_file():
        return 0
    out = subprocess.run([sys.executable, "-c", (
        "from stages.code_digest import *\n"
        "from evichain.io import write_text\n"
        "s = load_stages()\n"
        "t = [n[len(STAGE_PREFIX):] for n in s if n.startswith(STAGE_PREFIX)]\n"
        "[write_text(digest(listed_files(x, s)), digest_path(x)) for x in t]\n"
        "print(len(t))")], cwd=dest, capture_output=True, text=True, check=True)
    return int(out.stdout.strip() or 0)


def timed(cmd: list[str], cwd: Path, repeats: int) -> dict[str, Any]:
    """Wall seconds of ``cmd`` (one warm-up, then ``repeats`` runs), its exit code and the
    number of output lines of the last run."""
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    subprocess.run(cmd, check=False, cwd=cwd, env=env, capture_output=True, text=True)
    walls, proc = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.run(cmd, check=False, cwd=cwd, env=env, capture_output=True, text=True)
        walls.append(time.perf_counter() - start)
    assert proc is not None
    return {"cmd": " ".join(["dvc", *cmd[1:]]), "exit_code": proc.returncode,
            "wall_s": [round(w, 2) for w in walls], "median_s": round(statistics.median(walls), 2),
            "output_lines": len(proc.stdout.splitlines()), "output_tail": proc.stdout[-300:]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dvc-yaml", type=Path, help="time this dvc.yaml instead of the committed one")
    parser.add_argument("--label", default="committed dvc.yaml")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="dvc_noop", help="results file stem (appended to)")
    parser.add_argument("--keep", type=Path, help="build the scratch copy here and keep it "
                        "(an empty or new folder; e.g. to profile dvc in it afterwards)")
    args = parser.parse_args(argv)
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        raise SystemExit(f"--keep {args.keep}: not empty")
    with tempfile.TemporaryDirectory(prefix="dvc-noop-") as tmp:
        dest = Path(tmp) if args.keep is None else args.keep.resolve()
        dest.mkdir(parents=True, exist_ok=True)
        scratch_copy(dest, args.dvc_yaml)
        os.chdir(dest)  # DVC's API resolves stage paths against the working directory
        subprocess.run([DVC, "config", "--local", "core.no_scm", "true"], cwd=dest, check=True)
        digests = code_digests(dest)
        n_stages, made = placeholders(dest)
        lock_lines = record_every_stage(dest)
        status = timed([DVC, "status", "-q"], dest, args.repeats)
        repro = timed([DVC, "repro"], dest, args.repeats)
        dvc_yaml_lines = len((dest / "dvc.yaml").read_text().splitlines())
        os.chdir(ROOT)
    row = {"label": args.label, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
           "load_avg_before": os.getloadavg()[0], "stages": n_stages, "code_digests": digests,
           "placeholders": made, "dvc_yaml_lines": dvc_yaml_lines, "lock_lines": lock_lines,
           "status": status, "repro": repro}
    RESULTS.mkdir(parents=True, exist_ok=True)
    with (RESULTS / f"{args.out}.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
    print(json.dumps(row, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
