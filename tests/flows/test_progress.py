"""Progress lines of a fan-out: count, percentage, elapsed time, rate and ETA, logged every 10 %
or every 30 s, whichever comes first, never twice within a second (an injected clock)."""

from __future__ import annotations

import pytest

from flows import common
from flows.common import Progress, format_duration, format_rate


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _progress(total: int, clock: Clock, unit: str = "item") -> tuple[Progress, list[str]]:
    lines: list[str] = []
    return Progress(total, "extract (passages)", unit=unit, clock=clock, log=lines.append), lines


@pytest.fixture(autouse=True)
def _no_artifacts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "create_progress_artifact", lambda **kw: None)


def test_line_shows_count_elapsed_rate_and_eta() -> None:
    clock = Clock()
    progress, lines = _progress(120, clock, unit="passage")
    clock.now += 66.0
    progress.advance(30)
    assert lines == ["extract (passages): 30/120 (25%), 1m06s elapsed, 2.2 s/passage, ETA 3m18s"]
    clock.now += 4.0
    progress.advance(90)
    assert lines[-1] == "extract (passages): 120/120 (100%), 1m10s elapsed, 1.7 passages/s, done"


def test_rate_reads_as_items_per_second_or_seconds_per_item() -> None:
    assert format_rate(50, 2.0) == "25.0 items/s"
    assert format_rate(500, 2.0) == "250 items/s"
    assert format_rate(2, 5.0) == "2.5 s/item"
    assert format_rate(1, 250.0, "question") == "250 s/question"
    assert format_rate(0, 3.0) == "- items/s"
    assert [format_duration(s) for s in (0.4, 42, 185, 7620)] == ["0s", "42s", "3m05s", "2h07m"]


def test_a_line_every_ten_percent_when_items_are_fast() -> None:
    clock = Clock()
    progress, lines = _progress(100, clock)
    for _ in range(100):
        clock.now += 0.5  # 10 % every 5 s: the percentage decides
        progress.advance()
    assert [line.split(" ")[2] for line in lines] == [f"{n}/100" for n in range(10, 101, 10)]


def test_a_line_every_thirty_seconds_when_items_are_slow() -> None:
    clock = Clock()
    progress, lines = _progress(1000, clock)
    for _ in range(10):
        clock.now += 12.0  # 0.1 % per item: 30 s pass long before 10 %
        progress.advance()
    # 30 s after the start (3rd item, 36 s), then 30 s after that line (6th, 72 s), ...
    assert [line.split(" ")[2] for line in lines] == ["3/1000", "6/1000", "9/1000"]
    assert lines[0].endswith("36s elapsed, 12.0 s/item, ETA 3h19m")


def test_never_more_than_one_line_a_second_except_the_last() -> None:
    clock = Clock()
    progress, lines = _progress(10, clock)
    for _ in range(9):
        clock.now += 0.3  # every item is 10 %, yet lines come at most once a second
        progress.advance()
    clock.now += 0.01
    progress.advance()
    shown = [line.split(" ")[2] for line in lines]
    assert shown == ["4/10", "8/10", "10/10"]


def test_resumed_items_count_as_done_but_not_in_the_rate_or_eta() -> None:
    clock = Clock()
    progress, lines = _progress(100, clock, unit="passage")
    progress.resume(50)  # from checkpoints, at once (no line within a second of the start)
    clock.now += 100.0
    progress.advance(10)  # 10 passages in 100 s: 10 s each, 40 left
    assert lines[-1] == ("extract (passages): 60/100 (60%, 50 resumed), 1m40s elapsed, "
                         "10.0 s/passage, ETA 6m40s")
