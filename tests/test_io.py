"""evichain.io: an interrupted write leaves the committed file as it was and no temporary file."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import pytest

from evichain import io
from evichain.data.sources import write_checksums


def _leftovers(folder: Path) -> list[str]:
    """Temporary files of atomic_path left in ``folder``."""
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def _half_then(exc: BaseException) -> Any:
    """A serializer stand-in that writes part of a file to its target, then raises ``exc``."""
    def serializer(*args: Any, **kwargs: Any) -> None:
        target = next(a for a in args if isinstance(a, (str, Path)))
        Path(target).write_bytes(b"half a file")
        raise exc
    return serializer


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), OSError("disk full")])
def test_interrupted_parquet_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       exc: BaseException) -> None:
    target = io.write_parquet(pd.DataFrame({"a": [1, 2]}), tmp_path / "t.parquet")
    before = target.read_bytes()
    monkeypatch.setattr(io.pq, "write_table", _half_then(exc))
    with pytest.raises(type(exc)):
        io.write_parquet(pd.DataFrame({"a": [3]}), target)
    assert target.read_bytes() == before and _leftovers(tmp_path) == []


def test_interrupted_text_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = io.write_text("old\n", tmp_path / "t.md")
    original = Path.write_text

    def half(self: Path, data: str, *args: Any, **kwargs: Any) -> int:
        original(self, data[: len(data) // 2], *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", half)
    with pytest.raises(KeyboardInterrupt):
        io.write_text("new content\n", target)
    monkeypatch.undo()
    assert target.read_text(encoding="utf-8") == "old\n" and _leftovers(tmp_path) == []


def test_unserializable_json_keeps_the_old_file(tmp_path: Path) -> None:
    target = io.write_json({"a": 1}, tmp_path / "t.json")
    before = target.read_bytes()
    with pytest.raises(TypeError, match="not JSON serialisable"):
        io.write_json({"a": object()}, target)
    assert target.read_bytes() == before and _leftovers(tmp_path) == []


def test_interrupt_inside_atomic_path_keeps_the_old_file(tmp_path: Path) -> None:
    target = io.write_text("old\n", tmp_path / "t.txt")
    with pytest.raises(KeyboardInterrupt), io.atomic_path(target) as tmp:
        tmp.write_bytes(b"partial")
        raise KeyboardInterrupt
    assert target.read_text(encoding="utf-8") == "old\n" and _leftovers(tmp_path) == []


def test_failed_first_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(io.pq, "write_table", _half_then(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        io.write_parquet(pd.DataFrame({"a": [1]}), tmp_path / "new.parquet")
    assert list(tmp_path.iterdir()) == []


def test_writes_replace_and_get_the_umask_mode(tmp_path: Path) -> None:
    target = io.write_text("one\n", tmp_path / "sub" / "t.txt")
    io.write_text("two\n", target)
    assert target.read_text(encoding="utf-8") == "two\n" and _leftovers(target.parent) == []
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask  # not mkstemp's 0o600


def test_interrupted_checksum_write_keeps_the_old_list(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.json").write_text("{}", encoding="utf-8")
    sums = write_checksums(tmp_path, ["a.json"])
    before = sums.read_bytes()
    (tmp_path / "a.json").write_text("[]", encoding="utf-8")
    original = Path.write_text

    def half(self: Path, data: str, *args: Any, **kwargs: Any) -> int:
        original(self, data[:10], *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", half)
    with pytest.raises(KeyboardInterrupt):
        write_checksums(tmp_path, ["a.json"])
    monkeypatch.undo()
    assert sums.read_bytes() == before and _leftovers(tmp_path) == []


def test_polars_and_pandas_frames_give_the_same_parquet_bytes(tmp_path: Path) -> None:
    """The same content written from pandas and from polars is the same file (list and nested
    list columns included), so moving a stage to polars leaves its outputs byte-identical."""
    columns = {"question_id": ["q1", "q2", "q3"], "rank": [1, 2, 3], "score": [0.5, 0.25, None],
               "gold": [["p1", "p2"], [], ["p3"]], "positions": [[1, 2], [3], []],
               "nested": [[["a", "b"]], [], [["c"]]], "ok": [True, False, True]}
    from_pandas = io.write_parquet(pd.DataFrame(columns), tmp_path / "pd.parquet")
    from_polars = io.write_parquet(pl.DataFrame(columns), tmp_path / "pl.parquet")
    assert from_pandas.read_bytes() == from_polars.read_bytes()
    assert io.read_table(from_polars).to_dict(as_series=False) == columns
