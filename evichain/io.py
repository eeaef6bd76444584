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
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq


@contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success fsync it and rename it over ``target``.

    The temporary file is ``.<name>.<random>.tmp`` in the target's folder, so ``os.replace`` is
    an atomic rename on the same file system: readers see the old file or the new one, never a
    part. If the ``with`` body raises anything (a serializer error, ``KeyboardInterrupt``), the
    temporary file is removed and ``target`` is left exactly as it was. The new file gets the
    mode a plain ``open(target, "w")`` would give (``0o666`` minus the umask), not ``mkstemp``'s
    ``0o600``; after the rename the folder is fsynced so the rename itself survives a crash.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp: Path | None = None
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        tmp = Path(tmp_name)
        os.close(fd)
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, target)
        _fsync_dir(target.parent)
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def _read_umask() -> int:
    """The process umask, read once at import (setting and restoring it, as there is no getter,
    is not thread-safe, so it is not done per write)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def _fsync_dir(directory: Path) -> None:
    """fsync a folder so a rename in it is durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows: folders cannot be opened; rename durability is the OS's
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_parquet(df: pd.DataFrame | pl.DataFrame, path: str | Path) -> Path:
    """Write ``df`` as Parquet atomically and byte-deterministically (no pandas index).

    A polars frame is written with the Arrow types pandas gives the same content
    (:func:`arrow_table`), so a table moved from pandas to polars keeps its bytes on disk.
    """
    table = arrow_table(df) if isinstance(df, pl.DataFrame) else pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata(None)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", write_statistics=False)
    return Path(path)


def _list_item_type(dtype: pa.DataType) -> pa.DataType:
    """Inside a list pandas writes ``string`` and ``list`` (32-bit offsets)."""
    if pa.types.is_large_string(dtype) or pa.types.is_string_view(dtype):
        return pa.string()
    if pa.types.is_large_list(dtype) or pa.types.is_list(dtype):
        return pa.list_(_list_item_type(dtype.value_type))
    return dtype


def _column_type(dtype: pa.DataType) -> pa.DataType:
    """A top-level column: ``large_string`` (pandas' Arrow-backed ``str``) and ``list`` with
    32-bit offsets (pandas' object column of lists); other types are the same in both."""
    if pa.types.is_string_view(dtype):
        return pa.large_string()
    if pa.types.is_large_list(dtype) or pa.types.is_list(dtype):
        return pa.list_(_list_item_type(dtype.value_type))
    return dtype


def arrow_table(df: pl.DataFrame) -> pa.Table:
    """``df`` as one-chunk Arrow columns typed as ``pa.Table.from_pandas`` types the same data.

    polars exports ``large_list<large_string>`` where pandas gives ``list<string>``; cast so
    the Parquet bytes do not depend on which library built the table. Note: polars keeps a
    float NaN as NaN, while pandas writes it as null; a migrated table must use nulls.
    """
    table = df.to_arrow()
    schema = pa.schema([pa.field(f.name, _column_type(f.type)) for f in table.schema])
    return table.cast(schema).combine_chunks()


class MissingArtifactError(FileNotFoundError):
    """A stage input that an earlier stage has not produced (yet)."""


def read_parquet(path: str | Path, columns: list[str] | None = None) -> pd.DataFrame:
    """Read a Parquet file, failing with the path in the message if it is missing."""
    path = Path(path)
    if not path.exists():
        raise MissingArtifactError(f"{path} does not exist: run the stage that produces it first")
    return pq.read_table(path, columns=columns).to_pandas()


def read_table(path: str | Path, columns: list[str] | None = None) -> pl.DataFrame:
    """Read a Parquet file as a polars DataFrame, failing with the path in the message if it is
    missing."""
    path = Path(path)
    if not path.exists():
        raise MissingArtifactError(f"{path} does not exist: run the stage that produces it first")
    return pl.read_parquet(path, columns=columns)


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
