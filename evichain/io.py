"""Atomic, deterministic file writes and typed reads.

Every stage output goes through these helpers: a file is written to a temporary sibling,
flushed to disk and renamed over the target, so a crash never leaves a half-written output,
and the same content always produces the same bytes (sorted keys, no timestamps).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


@contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; rename it over ``target`` on success."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_parquet(df: pd.DataFrame, path: str | Path) -> Path:
    """Write ``df`` as Parquet atomically and byte-deterministically (no pandas index)."""
    table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata(None)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", write_statistics=False)
    return Path(path)


class MissingArtifactError(FileNotFoundError):
    """A stage input that an earlier stage has not produced (yet)."""


def read_parquet(path: str | Path, columns: list[str] | None = None) -> pd.DataFrame:
    """Read a Parquet file, failing with the path in the message if it is missing."""
    path = Path(path)
    if not path.exists():
        raise MissingArtifactError(f"{path} does not exist: run the stage that produces it first")
    return pq.read_table(path, columns=columns).to_pandas()


def write_json(obj: Any, path: str | Path) -> Path:
    """Write JSON atomically with sorted keys and a trailing newline."""
    text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, default=_json_default)
    return write_text(text + "\n", path)


def write_text(text: str, path: str | Path) -> Path:
    """Write UTF-8 text atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def read_json(path: str | Path) -> Any:
    """Read a JSON file."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
