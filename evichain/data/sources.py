"""Reading the benchmark source files under ``data/`` safely.

Rules
- ``data/SHA256SUMS`` (``sha256sum`` format: ``<64 hex>  <path relative to data/>``) lists every
  benchmark file. :func:`verify_sources` checks the files a conversion reads against it before
  anything is read, so a truncated or edited copy fails loudly instead of silently changing
  the benchmark.
- Every error names the file (and the line/column for malformed JSON) and says what to do.
- Missing or mistyped fields in a record raise :class:`MalformedSourceError` naming the file
  and the record.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evichain.io import write_text

CHECKSUMS_FILE = "SHA256SUMS"
SHARED_HINT = "re-copy it from the shared benchmark data (../shared/data, see data/SOURCES.md)"
_SUM_LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")


class SourceDataError(Exception):
    """A benchmark source file that cannot be used as it is."""


class MissingSourceError(SourceDataError, FileNotFoundError):
    """A source file (or ``SHA256SUMS``) does not exist."""


class ChecksumMismatchError(SourceDataError):
    """A source file's SHA-256 differs from ``SHA256SUMS``, or it has no entry there."""


class MalformedSourceError(SourceDataError, ValueError):
    """A source file is not valid JSON, or a record lacks a field or has the wrong type."""


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_checksums(source_dir: Path) -> dict[str, str]:
    """Parse ``source_dir/SHA256SUMS`` into {relative path: hex sum}."""
    sums_path = Path(source_dir) / CHECKSUMS_FILE
    if not sums_path.is_file():
        raise MissingSourceError(f"{sums_path}: checksum list not found; {SHARED_HINT}")
    sums: dict[str, str] = {}
    for lineno, line in enumerate(sums_path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        match = _SUM_LINE.match(line)
        if not match:
            raise MalformedSourceError(
                f"{sums_path}: line {lineno} is not '<sha256>  <path>': {line!r}"
            )
        sums[match.group(2)] = match.group(1).lower()
    return sums


def write_checksums(source_dir: Path, files: Iterable[str]) -> Path:
    """Write ``source_dir/SHA256SUMS`` for ``files`` (relative paths), sorted by path, atomically."""
    source_dir = Path(source_dir)
    lines = [f"{sha256_file(source_dir / rel)}  {rel}\n" for rel in sorted(files)]
    return write_text("".join(lines), source_dir / CHECKSUMS_FILE)


def verify_sources(source_dir: Path, files: Iterable[str]) -> None:
    """Check that each file (relative to ``source_dir``) exists and matches ``SHA256SUMS``."""
    source_dir = Path(source_dir)
    sums = read_checksums(source_dir)
    for rel in files:
        _verify_one(source_dir, rel, sums)


def _verify_one(source_dir: Path, rel: str, sums: dict[str, str]) -> None:
    path = source_dir / rel
    if not path.is_file():
        raise MissingSourceError(f"{path}: source file not found; {SHARED_HINT}")
    expected = sums.get(rel)
    if expected is None:
        raise ChecksumMismatchError(
            f"{path}: no entry for {rel!r} in {source_dir / CHECKSUMS_FILE}; if the file is a "
            f"genuine benchmark file add it with `cd {source_dir} && sha256sum {rel} >> {CHECKSUMS_FILE}`"
        )
    actual = sha256_file(path)
    if actual != expected:
        raise ChecksumMismatchError(
            f"{path}: SHA-256 mismatch (expected {expected}, actual {actual}); the file is not the "
            f"released benchmark file: {SHARED_HINT}"
        )


def load_json(path: Path) -> Any:
    """Parse a JSON file; a syntax error names the file, line, column and character offset."""
    text = _read_text(Path(path))
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedSourceError(
            f"{path}: malformed JSON at line {exc.lineno}, column {exc.colno} (char {exc.pos}): "
            f"{exc.msg}; {SHARED_HINT}"
        ) from None


def load_jsonl(path: Path) -> list[Any]:
    """Parse a JSON-lines file (blank lines skipped); errors name the file and line."""
    records: list[Any] = []
    for lineno, line in enumerate(_read_text(Path(path)).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise MalformedSourceError(
                f"{path}: malformed JSON at line {lineno}, column {exc.colno}: {exc.msg}; {SHARED_HINT}"
            ) from None
    return records


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise MissingSourceError(f"{path}: source file not found; {SHARED_HINT}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedSourceError(f"{path}: not UTF-8 text (byte {exc.start}); {SHARED_HINT}") from None


def expect_type(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    """Return ``value`` if it is a ``kind``; otherwise raise naming ``where``."""
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise MalformedSourceError(f"{where}: expected {names}, got {type(value).__name__}")
    return value


def field(record: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """``record[key]`` checked for presence and type; errors name ``where`` and the key.

    A string value must be valid Unicode: JSON can spell a lone surrogate (``"\\ud800"``),
    which no UTF-8 writer accepts later, so it is rejected here, where the record is known.
    """
    expect_type(record, dict, where)
    if key not in record:
        raise MalformedSourceError(f"{where}: missing field {key!r}")
    value = expect_type(record[key], kind, f"{where}: field {key!r}")
    if isinstance(value, str):
        check_unicode(value, f"{where}: field {key!r}")
    return value


def check_unicode(value: str, where: str) -> str:
    """``value`` if it encodes as UTF-8; a lone surrogate raises naming ``where``."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MalformedSourceError(
            f"{where}: not valid Unicode (a lone surrogate {value[exc.start]!r} at character "
            f"{exc.start}, from a JSON escape such as \\ud800 without its pair); fix that record "
            f"in the source file, or {SHARED_HINT}"
        ) from None
    return value
