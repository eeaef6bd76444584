"""Is every recorded stage of ``dvc.lock`` still the record of the committed code? (a pipeline check)

    python -m scripts.lock_check            # list stale lock entries, with the first reason of each
    python -m scripts.lock_check --check    # exit 1 unless the stale entries are exactly the listed ones
    python -m scripts.lock_check --recorded [--datasets demo,musique]   # recorded stage names
    python -m scripts.lock_check --write-known   # rewrite the list of known stale entries (after a re-run)

A lock entry is *stale* when what it recorded differs from the repository as committed:

* a source dep (a file under ``evichain/``, ``flows/``, ``stages/``, ``scripts/``, or a code
  digest ``pipeline/code/<template>.md5``, which stands for the files its ``code_<template>``
  stage lists: ``stages/code_digest.py``) whose md5 differs from the file now, or which no
  longer exists;
* its source deps are not the set ``dvc.yaml`` lists for the stage now (an import added or
  removed since; ``dvc.yaml``'s lists are the stages' imports, ``scripts/dvc_deps.py``);
* a ``params.yaml`` value it recorded that differs now, or a params file
  (``pipeline/params/...``, written by ``params_<template>``) whose md5 differs now, or none
  recorded where ``dvc.yaml`` now lists one;
* a committed output (``reports/...``) whose md5 differs from the file now (the committed
  result is not the one the lock recorded).

Deps and outputs under ``artifacts/`` (rebuilt, never committed) are not compared: on a fresh
clone they do not exist yet, and ``dvc status`` lists them as missing, never as changed.
Everything compared is in git, so the answer is the same on every clone of a commit: CI runs
``--check`` (``tests/scripts/test_lock_check.py``), which fails when a commit changes code or
params without re-recording the lock entries that depend on them.

``reproduce/stale-lock-entries.txt`` lists the entries known to be stale (recorded before a
change and not yet re-run; ``make repro`` re-runs them). ``--check`` fails on a stale entry
missing from it (a change without a re-run) and on a listed entry that is fresh (a re-run: take
it off the list), so the list only shrinks as stages are re-recorded.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scripts.dvc_deps import PARAMS_DIR, dep_path, is_source

ROOT = Path(__file__).resolve().parents[1]
KNOWN_STALE = "reproduce/stale-lock-entries.txt"
UNCOMPARED = ("artifacts/",)

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Staleness:
    """One lock entry and why it is stale (empty: fresh)."""

    stage: str
    reasons: tuple[str, ...]

    @property
    def stale(self) -> bool:
        return bool(self.reasons)


def load_yaml(path: Path) -> Any:
    """A YAML file read with the C loader where PyYAML has it (dvc.lock is ~60k lines)."""
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader) or {}


class Files:
    """md5 of repository files, each read once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._md5: dict[str, str | None] = {}

    def md5(self, rel: str) -> str | None:
        """The file's md5 as DVC 3 records it (of the raw bytes); None for a missing file."""
        if rel not in self._md5:
            path = self.root / rel
            self._md5[rel] = hashlib.md5(path.read_bytes()).hexdigest() if path.is_file() else None
        return self._md5[rel]


def param_value(params: dict[str, Any], key: str) -> Any:
    """``a.b.c`` read off ``params``; a missing key reads as the marker ``<missing>``."""
    value: Any = params
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return "<missing>"
        value = value[part]
    return value


def same_value(recorded: Any, now: Any) -> bool:
    """Equal params values, reading numbers the YAML 1.2 way on both sides: DVC writes the lock
    with ruamel (YAML 1.2), where ``1e-10`` is a float; PyYAML (YAML 1.1) reads it as a string."""
    if isinstance(recorded, dict) and isinstance(now, dict):
        return recorded.keys() == now.keys() and all(same_value(recorded[k], now[k]) for k in now)
    if isinstance(recorded, list) and isinstance(now, list):
        return len(recorded) == len(now) and all(map(same_value, recorded, now))
    if isinstance(recorded, bool) or isinstance(now, bool):
        return type(recorded) is type(now) and recorded == now
    if recorded == now:
        return True
    if isinstance(recorded, str) != isinstance(now, str):
        try:
            return float(recorded) == float(now)
        except (TypeError, ValueError):
            return False
    return False


def template_source_deps(dvc: dict[str, Any]) -> dict[str, set[str]]:
    """Source deps ``dvc.yaml`` lists for each stage template (matrix and foreach items share
    their template's list)."""
    out: dict[str, set[str]] = {}
    for name, spec in (dvc.get("stages") or {}).items():
        body = spec.get("do", spec)
        out[name] = {d for d in map(dep_path, body.get("deps") or []) if is_source(d)}
    return out


def templates_with_params_file(dvc: dict[str, Any]) -> set[str]:
    """Templates whose stages depend on a params file (``pipeline/params/...``) of their
    ``params_<template>`` stage."""
    return {name for name, spec in (dvc.get("stages") or {}).items()
            if any(d.startswith(PARAMS_DIR + "/") for d in map(dep_path, spec.get("do", spec).get("deps") or []))}


def _compared(path: str) -> bool:
    return not path.startswith(UNCOMPARED)


def _dep_reasons(entry: dict[str, Any], files: Files) -> list[str]:
    reasons = []
    for dep in entry.get("deps") or []:
        path, md5 = dep["path"], str(dep.get("md5", ""))
        if not _compared(path) or not (is_source(path) or path.startswith(("scripts/", PARAMS_DIR + "/"))):
            continue
        if md5.endswith(".dir"):
            reasons.append(f"{path}: recorded as a directory dep (deps are files now)")
        elif files.md5(path) != md5:
            reasons.append(f"{path}: {'deleted' if files.md5(path) is None else 'modified'}")
    return reasons


def _param_reasons(entry: dict[str, Any], params: dict[str, Any]) -> list[str]:
    recorded = (entry.get("params") or {}).get("params.yaml") or {}
    return [f"params.yaml {key}: changed" for key, value in recorded.items()
            if not same_value(value, param_value(params, key))]


def _out_reasons(entry: dict[str, Any], files: Files) -> list[str]:
    reasons = []
    for out in entry.get("outs") or []:
        path, md5 = out["path"], str(out.get("md5", ""))
        if _compared(path) and not md5.endswith(".dir") and (files.root / path).is_file() \
                and files.md5(path) != md5:
            reasons.append(f"{path}: committed output differs from the recorded one")
    return reasons


def staleness(root: Path = ROOT) -> list[Staleness]:
    """Every entry of ``root``'s dvc.lock with the reasons it is stale, in lock order."""
    lock = load_yaml(root / "dvc.lock").get("stages") or {}
    dvc = load_yaml(root / "dvc.yaml")
    templates, with_params = template_source_deps(dvc), templates_with_params_file(dvc)
    params = load_yaml(root / "params.yaml")
    files = Files(root)
    found = []
    for stage, entry in lock.items():
        reasons = _dep_reasons(entry, files) + _param_reasons(entry, params)
        listed = templates.get(stage.split("@")[0])
        if stage.split("@")[0] in with_params and not any(
                dep["path"].startswith(PARAMS_DIR + "/") for dep in entry.get("deps") or []):
            reasons.append(f"no {PARAMS_DIR}/ dep recorded (its params moved to params_<template>)")
        if listed is None:
            reasons.append("no such stage in dvc.yaml")
        else:
            recorded = {dep["path"] for dep in entry.get("deps") or [] if is_source(dep["path"])}
            if recorded != listed:
                reasons.append(f"source deps changed ({len(listed - recorded)} added, "
                               f"{len(recorded - listed)} removed)")
        found.append(Staleness(stage, tuple(reasons + _out_reasons(entry, files))))
    return found


def known_stale(root: Path = ROOT) -> set[str]:
    """Stage names listed in :data:`KNOWN_STALE` (``#`` starts a comment)."""
    path = root / KNOWN_STALE
    if not path.is_file():
        return set()
    lines = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return {line for line in lines if line}


def check(root: Path = ROOT) -> list[str]:
    """Problems: stale entries not listed as known, and listed entries that are fresh."""
    entries = staleness(root)
    listed = known_stale(root)
    problems = [f"{e.stage}: stale ({e.reasons[0]}{', ...' if len(e.reasons) > 1 else ''}): "
                f"re-run it (make repro) and commit dvc.lock" for e in entries
                if e.stale and e.stage not in listed]
    fresh = {e.stage for e in entries if not e.stale}
    problems += [f"{name}: listed in {KNOWN_STALE} but fresh: take it off the list"
                 for name in sorted(listed & fresh)]
    problems += [f"{name}: listed in {KNOWN_STALE} but not in dvc.lock"
                 for name in sorted(listed - {e.stage for e in entries})]
    return problems


KNOWN_HEADER = """\
# dvc.lock entries that do not record the committed code, params or results (scripts/lock_check.py):
# recorded before a change and not re-run since. `make repro` re-runs them from the recorded LLM
# answers; then `python -m scripts.lock_check --write-known` shrinks this list. The test
# tests/scripts/test_lock_check.py fails when this list and the lock disagree.
# <stage>  # the first reason it is stale
"""


def write_known(root: Path = ROOT) -> int:
    """Rewrite :data:`KNOWN_STALE` with the entries stale now; returns how many."""
    stale = [e for e in staleness(root) if e.stale]
    lines = [f"{e.stage}  # {e.reasons[0]}" for e in stale]
    (root / KNOWN_STALE).write_text(KNOWN_HEADER + "\n".join(lines) + ("\n" if lines else ""),
                                    encoding="utf-8")
    return len(stale)


def recorded(root: Path = ROOT, datasets: set[str] | None = None) -> list[str]:
    """Stage names of dvc.lock (the stages with a recorded result), optionally only those of
    ``datasets`` (the label's item up to its first ``-``; ``report`` always)."""
    names = list((load_yaml(root / "dvc.lock").get("stages") or {}))
    if not datasets:
        return names
    return [n for n in names if "@" not in n or n.split("@", 1)[1].split("-", 1)[0] in datasets]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="compare with " + KNOWN_STALE)
    mode.add_argument("--recorded", action="store_true", help="print recorded stage names")
    mode.add_argument("--write-known", action="store_true", help="rewrite " + KNOWN_STALE)
    parser.add_argument("--datasets", default="", help="with --recorded: comma-separated datasets")
    args = parser.parse_args(argv)
    if args.recorded:
        print("\n".join(recorded(ROOT, {d for d in args.datasets.split(",") if d} or None)))
        return 0
    if args.write_known:
        print(f"{KNOWN_STALE}: {write_known(ROOT)} stale entries listed")
        return 0
    if args.check:
        problems = check(ROOT)
        print("\n".join(problems) if problems else "dvc.lock: every stale entry is listed; "
              "every other entry records the committed code, params and results")
        return 1 if problems else 0
    entries = staleness(ROOT)
    for e in entries:
        if e.stale:
            more = f" (+{len(e.reasons) - 1} more)" if len(e.reasons) > 1 else ""
            print(f"{e.stage}: {e.reasons[0]}{more}")
    print(f"{sum(e.stale for e in entries)} of {len(entries)} lock entries stale")
    return 0


if __name__ == "__main__":
    sys.exit(main())
