"""Stage ``code_<template>``: one digest of the source files a stage template imports.

    python -m stages.code_digest <template>      # writes pipeline/code/<template>.md5

Why: a stage's source deps are exactly the project files its command imports
(``scripts/dvc_deps.py``), ~50 files per stage. Listed on each of the ~400 stages they made
``dvc.lock`` ~60k lines, which DVC re-reads and rewrites after every stage it runs, and
``dvc status`` check ~20k dep entries. Instead the template's ``code_<template>`` stage lists
those files, once, and writes their md5s here; every stage of the template depends on this one
file. A change to an imported file re-runs ``code_<template>``; its digest then changes, and
DVC re-runs the template's stages, and only them.

The digest is ``md5sum``'s format (``<md5>  <path>``, one line per file, in the order
``dvc.yaml`` lists them), so it is readable and checkable with ``md5sum -c``. It covers every
source dep of the code stage except this module itself, whose edits change no result.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Any

import yaml

from evichain.io import write_text

DIGEST_DIR = Path("pipeline/code")
"""Where the digests live (committed: a fresh clone's ``dvc status`` compares them)."""
STAGE_PREFIX = "code_"
SELF = "stages/code_digest.py"


def digest_path(template: str) -> Path:
    """``pipeline/code/<template>.md5``."""
    return DIGEST_DIR / f"{template}.md5"


def load_stages(dvc_yaml: Path = Path("dvc.yaml")) -> dict[str, Any]:
    """The ``stages`` of ``dvc_yaml`` (read with PyYAML's C loader where it has one)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return (yaml.load(dvc_yaml.read_text(encoding="utf-8"), Loader=loader) or {}).get("stages") or {}


def listed_files(template: str, stages: dict[str, Any]) -> list[str]:
    """The deps ``dvc.yaml`` (its ``stages``) lists for ``code_<template>``, this module aside."""
    name = STAGE_PREFIX + template
    if name not in stages:
        raise SystemExit(f"dvc.yaml: no stage {name!r} (run: python -m scripts.dvc_deps --write)")
    deps = [next(iter(d)) if isinstance(d, dict) else str(d) for d in stages[name].get("deps") or []]
    return [d for d in deps if d != SELF]


def digest(files: list[str], root: Path = Path(".")) -> str:
    """``<md5>  <path>`` per file (md5 of its raw bytes, as DVC records it)."""
    return "".join(f"{hashlib.md5((root / f).read_bytes()).hexdigest()}  {f}\n" for f in files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.code_digest",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("template", help="the stage template whose imports to digest")
    args = parser.parse_args(argv)
    files = listed_files(args.template, load_stages())
    write_text(digest(files), digest_path(args.template))
    print(f"{digest_path(args.template)}: {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
