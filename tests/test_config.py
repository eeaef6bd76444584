"""params.yaml validation: defaults load; bad keys and values are named in the error."""

from __future__ import annotations

from pathlib import Path

import pytest

from evichain.config import ParamsError, load_params, parse_params

ROOT = Path(__file__).resolve().parents[1]


def test_repository_params_are_valid() -> None:
    params = load_params(ROOT / "params.yaml")
    assert "demo" in params.datasets and params.retrieval.bm25.top_k == 20


def test_unknown_key_is_named() -> None:
    with pytest.raises(ParamsError, match=r"unknown key 'retrieval\.bm25\.kk1'"):
        parse_params({"retrieval": {"bm25": {"kk1": 1.0}}}, source="params.yaml")


def test_out_of_range_value_is_named() -> None:
    with pytest.raises(ParamsError, match=r"params\.yaml: retrieval\.bm25\.b: .*less than or equal to 1"):
        parse_params({"retrieval": {"bm25": {"b": 3}}}, source="params.yaml")


def test_unknown_dataset_is_named() -> None:
    with pytest.raises(ParamsError, match="unknown dataset"):
        parse_params({"datasets": ["demo", "nq"]})


def test_missing_and_malformed_file(tmp_path: Path) -> None:
    with pytest.raises(ParamsError, match="file not found"):
        load_params(tmp_path / "nope.yaml")
    bad = tmp_path / "p.yaml"
    bad.write_text("datasets: [demo\n")
    with pytest.raises(ParamsError, match="not valid YAML"):
        load_params(bad)


def test_source_of_a_dataset() -> None:
    data = load_params(ROOT / "params.yaml").data
    assert [data.source_of(d) for d in ("demo", "2wiki_s", "hotpotqa_s", "medical_s", "musique")] == \
        ["2wiki", "2wiki", "hotpotqa", "medical", "musique"]
