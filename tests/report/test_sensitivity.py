"""Sensitivity sweep: one-at-a-time rows from `dvc exp show --json`, the figure, and the
``evichain sensitivity`` command (:mod:`evichain.report.sensitivity_lines`)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import polars as pl
import pytest
from typer.testing import CliRunner

from evichain.cli import app
from evichain.report.figures import sensitivity_figure
from evichain.report.sensitivity import one_at_a_time

ROOT = Path(__file__).resolve().parents[2]


def _record(name: str, alpha: float, beta: float, recall: float) -> dict:
    return {"rev": name, "name": name, "error": None, "experiments": None, "data": {
        "params": {"params.yaml": {"data": {"evireform": {"alpha": alpha, "beta": beta}}}},
        "metrics": {"reports/metrics/demo/evireform-full.json": {"data": {"Recall@5": recall}}}}}


def _show() -> list[dict]:
    head = _record("HEAD", 0.5, 0.5, 0.60)
    head["experiments"] = [{"name": "e", "revs": [_record("a25", 0.25, 0.5, 0.55),
                                                  _record("b75", 0.5, 0.75, 0.65),
                                                  _record("both", 0.25, 0.75, 0.99)]}]
    return [_record("workspace", 0.5, 0.5, 0.60), head]


def test_one_at_a_time_keeps_single_changes_and_the_baseline() -> None:
    table = one_at_a_time(_show(), ["evireform.alpha", "evireform.beta"],
                          [("demo", "evireform-full")], ["Recall@5"])
    alpha = table.filter(pl.col("param") == "evireform.alpha").sort("value")
    beta = table.filter(pl.col("param") == "evireform.beta").sort("value")
    assert alpha.select("value", "score").rows() == [(0.25, 0.55), (0.5, 0.60)]
    assert beta.select("value", "score").rows() == [(0.5, 0.60), (0.75, 0.65)]
    assert "both" not in set(table["experiment"])  # two parameters changed: not on any line


def test_sensitivity_figure_writes_a_png(tmp_path: Path) -> None:
    table = one_at_a_time(_show(), ["evireform.alpha", "evireform.beta"],
                          [("demo", "evireform-full")], ["Recall@5"])
    out = sensitivity_figure(table, tmp_path / "s.png", metric="Recall@5",
                             defaults={"evireform.alpha": 0.5})
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_command_writes_the_points_and_one_figure_per_metric(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    show = tmp_path / "show.json"
    show.write_text(json.dumps(_show()))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["sensitivity", "--metric", "Recall@5", "--show-json", str(show),
                                      "--params", str(ROOT / "params.yaml")])
    assert result.exit_code == 0, result.output
    assert "4 sweep points -> reports/plots/sensitivity.csv, reports/sensitivity/" in result.output
    table = pd.read_csv(tmp_path / "reports" / "plots" / "sensitivity.csv")
    assert sorted(table["param"].unique()) == ["evireform.alpha", "evireform.beta"]
    assert (tmp_path / "reports" / "sensitivity" / "Recall5.png").read_bytes()[:4] == b"\x89PNG"
    show.write_text(json.dumps(_show()[:1]))  # the baseline alone: no sweep
    empty = CliRunner().invoke(app, ["sensitivity", "--show-json", str(show),
                                     "--params", str(ROOT / "params.yaml")])
    assert empty.exit_code == 2 and "no one-at-a-time sweep" in empty.output
