"""Shard checkpoints of the LLM index builders (EviReform extraction, OpenIE triples, CEE
facets): where they live and how a shard file is read and written.

A finished shard is one JSON file ``{"outcomes": [...]}`` under :func:`checkpoint_root`, named
by a key hashing what determines its answers (model, sampling, prompt, passages); it lives
outside the stage outputs, which DVC deletes before a re-run, so an interrupted run resumes
from these files plus the LLM cache.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import platformdirs

from evichain.io import read_json, write_json


def checkpoint_root() -> Path:
    """``$EVICHAIN_CHECKPOINT_DIR`` or ``<user cache>/evichain/checkpoints`` (outside the
    stage outputs, which DVC deletes before a re-run)."""
    env = os.environ.get("EVICHAIN_CHECKPOINT_DIR")
    return Path(env).expanduser() if env else Path(platformdirs.user_cache_dir("evichain")) / "checkpoints"


def read_shard(path: Path) -> dict[str, Any] | None:
    """The shard file's content, or None when it is missing or unreadable (not JSON)."""
    if not path.exists():
        return None
    try:
        return read_json(path)
    except (OSError, ValueError):
        return None


def write_shard(path: Path, outcomes: Iterable[Any]) -> None:
    """Write ``{"outcomes": [asdict(o) ...]}`` atomically (``outcomes`` are dataclasses)."""
    write_json({"outcomes": [asdict(o) for o in outcomes]}, path)
