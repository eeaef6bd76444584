"""``python -m stages.params_digest <template>``: the values of the keys its params stage declares."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from stages import params_digest
from stages.params_digest import params_path

DVC = """\
stages:
  run:
    matrix:
      dataset: [a, b]
      method: [x, y]
    cmd: python -m stages.run --dataset ${item.dataset} --method ${item.method}
    deps:
      - pipeline/params/run/${item.method}.json
  params_run:
    matrix:
      method: [x, y]
    cmd: python -m stages.params_digest run --item method=${item.method}
    deps:
      - stages/params_digest.py
    params:
      - shared.k1
      - methods.${item.method}
    outs:
      - pipeline/params/run/${item.method}.json:
          cache: false
          persist: true
  params_flat:
    cmd: python -m stages.params_digest flat
    params:
      - shared
      - shared.tol
"""
PARAMS = """\
shared:
  k1: 0.9
  tol: 1e-10
methods:
  x: {depth: 2}
  y: {depth: 3, mode: fast}
"""


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "dvc.yaml").write_text(DVC)
    (tmp_path / "params.yaml").write_text(PARAMS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_one_file_per_item_with_only_that_items_params(project: Path) -> None:
    assert params_digest.main(["run", "--item", "method=y"]) == 0
    assert params_path("run", {"method": "y"}) == Path("pipeline/params/run/y.json")
    written = json.loads((project / "pipeline/params/run/y.json").read_text())
    assert written == {"shared.k1": 0.9, "methods.y": {"depth": 3, "mode": "fast"}}
    assert not (project / "pipeline/params/run/x.json").exists()


def test_values_are_read_as_dvc_reads_them_yaml_1_2(project: Path) -> None:
    """``1e-10`` is a float in YAML 1.2 (DVC's reading), a string in PyYAML's YAML 1.1."""
    params_digest.main(["flat"])
    written = json.loads((project / "pipeline/params/flat.json").read_text())
    assert written["shared.tol"] == 1e-10 and written["shared"]["k1"] == 0.9


def test_a_change_to_another_items_params_leaves_the_file_as_it_was(project: Path) -> None:
    params_digest.main(["run", "--item", "method=x"])
    before = (project / "pipeline/params/run/x.json").read_bytes()
    (project / "params.yaml").write_text(PARAMS.replace("mode: fast", "mode: slow"))
    params_digest.main(["run", "--item", "method=x"])
    assert (project / "pipeline/params/run/x.json").read_bytes() == before
    (project / "params.yaml").write_text(PARAMS.replace("k1: 0.9", "k1: 1.2"))
    params_digest.main(["run", "--item", "method=x"])
    assert (project / "pipeline/params/run/x.json").read_bytes() != before


def test_errors_name_the_key_and_the_missing_item(project: Path) -> None:
    with pytest.raises(SystemExit, match=r"--item method=<value>"):
        params_digest.main(["run"])
    (project / "params.yaml").write_text("shared: {k1: 1}\nmethods: {}\n")
    with pytest.raises(SystemExit, match=r"no key 'methods.x'"):
        params_digest.main(["run", "--item", "method=x"])
    with pytest.raises(SystemExit, match=r"no stage 'params_nope'"):
        params_digest.main(["nope"])


def test_the_names_agree_with_the_deps_tool() -> None:
    """scripts/dvc_deps.py reads the project by AST only, so it keeps its own copy of the names."""
    from scripts import dvc_deps

    assert params_digest.PARAMS_DIR.as_posix() == dvc_deps.PARAMS_DIR
    assert params_digest.STAGE_PREFIX == dvc_deps.PARAMS_PREFIX
    assert dvc_deps.params_template("params_run", yaml.safe_load(DVC)["stages"]["params_run"]) == "run"


def test_no_template_of_the_pipeline_declares_params_yaml_keys_itself() -> None:
    """DVC parses params.yaml once per stage that declares keys: only params stages do."""
    from scripts import dvc_deps

    dvc = yaml.safe_load((Path(__file__).resolve().parents[2] / "dvc.yaml").read_text())
    assert dvc_deps.params_problems(dvc) == []
    broken = {"stages": {"t": {"cmd": "python -m stages.t", "params": ["a.b"],
                               "deps": ["pipeline/params/t.json"]}}}
    problems = dvc_deps.params_problems(broken)
    assert "t: declares params.yaml keys (a.b, ...)" in problems[0]
    assert "no stage params_t" in problems[1]


def test_every_params_file_a_stage_depends_on_is_written_by_its_params_stage() -> None:
    """Resolved by DVC itself: each stage's params file is an output of ``params_<template>``,
    the committed file exists and holds exactly the values DVC reads for the declared keys."""
    from dvc.repo import Repo

    root = Path(__file__).resolve().parents[2]
    stages = list(Repo(str(root)).index.stages)
    producer = {str(o.def_path): s for s in stages for o in s.outs}
    params = params_digest.load_params(root / "params.yaml")
    checked = set()
    for stage in stages:
        for dep in stage.deps:
            path = str(dep.def_path)
            if not path.startswith("pipeline/params/") or path in checked:
                continue
            owner = producer[path]
            assert owner.name.startswith(f"params_{stage.name.split('@')[0]}")
            keys = sorted(k for d in owner.deps if d.__class__.__name__ == "ParamsDependency"
                          for k in d.params or [])
            assert (root / path).read_text() == params_digest.values_json(keys, params), path
            checked.add(path)
    assert len(checked) >= 45
