"""``scripts/crosscheck_metrics.py``: rows recorded earlier are kept only for unchanged metrics JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from scripts import crosscheck_metrics
from scripts.crosscheck_metrics import earlier_rows, json_md5


def _setup(root: Path) -> tuple[Path, Path]:
    """Two metrics JSON files without run files on this 'machine', and a report main table."""
    for method, recall in (("kept", 0.5), ("changed", 0.25)):
        (root / "reports/metrics/ds").mkdir(parents=True, exist_ok=True)
        (root / f"reports/metrics/ds/{method}.json").write_text(
            json.dumps({"n_questions": 4, "Recall@5": recall, "Recall@10": recall}))
    (root / "reports/README.md").write_text(
        "## Main table\n\n### ds (4 questions)\n\n| Method | Recall@5 | Recall@10 | F1 | EM |\n"
        "| --- | ---: | ---: | ---: | ---: |\n| kept | 50.00 | 50.00 | N/E | N/E |\n\n## Next\n")
    return root / "reports/metrics/ds/kept.json", root / "reports/metrics/ds/changed.json"


def test_earlier_row_kept_only_while_json_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept, changed = _setup(tmp_path)
    out = tmp_path / "results.md"
    out.write_text(f"| ds | kept | 4 | 1.00e-07 | {json_md5(kept.read_bytes())} | earlier |\n"
                   f"| ds | changed | 4 | 2.00e-07 | {'0' * 32} | earlier |\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["crosscheck_metrics.py", "--out", str(out)])
    crosscheck_metrics.main()
    text = out.read_text()
    assert f"| ds | kept | 4 | 1.00e-07 | {json_md5(kept.read_bytes())} | earlier |" in text
    assert "| ds | changed |" not in text  # its JSON changed since the check: dropped, not carried
    assert "2 percentage cells checked against the metrics JSON, 0 mismatches." in text
    assert set(earlier_rows(text)) == {("ds", "kept")}
    # neither JSON has reports/eval/ds/<method>.parquet in this checkout: both are listed
    assert "without a per-question table in reports/eval: 2 (ds/changed, ds/kept)." in text


def test_missing_per_question_lists_only_absent_tables(tmp_path: Path) -> None:
    _setup(tmp_path)
    (tmp_path / "reports/eval/ds").mkdir(parents=True)
    (tmp_path / "reports/eval/ds/kept.parquet").write_bytes(b"")
    (tmp_path / "reports/metrics/ds/empty.json").write_text(json.dumps({"n_questions": 0}))
    assert crosscheck_metrics.missing_per_question(tmp_path / "reports/metrics",
                                                   tmp_path / "reports/eval") == ["ds/changed"]


def test_earlier_rows_ignores_tables_without_md5() -> None:
    old_format = "| dataset | method | questions | max abs difference |\n| ds | m | 4 | 1.0e-07 |\n"
    assert earlier_rows(old_format) == {}
