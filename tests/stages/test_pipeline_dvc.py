"""`dvc repro` of the demo pipeline in a scratch copy, with the scripted LLM.

Checks: every stage runs and writes its outputs; a second `dvc repro` has nothing to do;
a changed dense parameter invalidates only the dense stages and their dependants.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DVC = str(Path(sys.executable).with_name("dvc"))
COPY = ["evichain", "flows", "stages", "dvc.yaml", "params.yaml", "data"]


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=env, text=True, capture_output=True, timeout=2400)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    work = tmp_path_factory.mktemp("pipeline")
    for name in COPY:
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(
            src, work / name, **({"ignore": shutil.ignore_patterns("__pycache__")} if src.is_dir() else {}))
    (work / "tests" / "fixtures").mkdir(parents=True)
    for rel in ("tests/__init__.py", "tests/fixtures/__init__.py", "tests/fixtures/scripted_llm.py"):
        shutil.copy2(ROOT / rel, work / rel)
    params = yaml.safe_load((work / "params.yaml").read_text())
    params.update(datasets=["demo"], llm_datasets=["demo"], evireform_datasets=["demo"],
                  cee_datasets=["demo"], baseline_datasets=[], tuning_datasets=[],
                  qa_datasets=[], fusion_datasets=[])
    params["evireform"]["sweep"]["datasets"] = []  # the sweep stage has its own tests
    if "datasets" in params.get("medical_qa", {}):
        params["medical_qa"]["datasets"] = []  # baselines and Medical QA have their own tests
    for key, keep in (("evireform_variants", ["base", "full"]), ("cee_variants", ["full"])):
        if key in params:  # every variant runs in the real pipeline; two keep this test short
            params[key] = keep
    params["llm"]["model"] = "scripted/demo"
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _drop_literal_non_demo_stages(work / "dvc.yaml")
    env = {**os.environ, "EVICHAIN_SCRIPTED_LLM": "tests.fixtures.scripted_llm:respond",
           "EVICHAIN_LLM_CACHE": str(work / "llm.sqlite"), "PYTHONPATH": str(work),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PREFECT_API_URL", None)
    _run([DVC, "init", "--no-scm", "-q"], work, env)
    _run([DVC, "config", "core.analytics", "false"], work, env)
    _drop_inputs_of_empty_templates(work)
    return work, env


def _drop_literal_non_demo_stages(path: Path) -> None:
    """Remove the stages whose matrix names its datasets literally, without the demo (e.g.
    ``retrieve_cee_robust: {dataset: [hotpotqa_s]}``): the params edits above cannot narrow
    them, and their inputs are outside this test's demo-only pipeline."""
    pipeline = yaml.safe_load(path.read_text())
    for name, stage in list(pipeline["stages"].items()):
        datasets = stage.get("matrix", {}).get("dataset")
        if isinstance(datasets, list) and "demo" not in datasets:
            del pipeline["stages"][name]
    path.write_text(yaml.safe_dump(pipeline, sort_keys=False))


def _drop_inputs_of_empty_templates(work: Path) -> None:
    """Remove ``code_<t>`` and ``params_<t>`` where template ``t`` has no stage left after the
    params edits above (its dataset list is empty here): ~50 stages of DVC overhead that write
    digests nothing in this test reads."""
    from dvc.repo import Repo

    with Repo(str(work)) as repo:
        names = {stage.name.split("@")[0] for stage in repo.index.stages}
    path = work / "dvc.yaml"
    pipeline = yaml.safe_load(path.read_text())
    for name in list(pipeline["stages"]):
        for prefix in ("code_", "params_"):
            if name.startswith(prefix) and name[len(prefix):] not in names:
                del pipeline["stages"][name]
    path.write_text(yaml.safe_dump(pipeline, sort_keys=False))


def params_n_questions(work: Path) -> int:
    return int(yaml.safe_load((work / "params.yaml").read_text())["data"]["demo"]["n_questions"])


@pytest.mark.slow
@pytest.mark.timeout(3000)  # a real dvc repro of the demo, its code and params stages: >1,500 s beside other jobs
def test_demo_pipeline_reproduces_then_is_up_to_date(project: tuple[Path, dict[str, str]]) -> None:
    work, env = project
    first = _run([DVC, "repro"], work, env)
    assert "Running stage 'read@demo-dense'" in first.stdout
    metrics = json.loads((work / "reports/metrics/demo/dense.json").read_text())
    n = params_n_questions(work)
    assert metrics["n_questions"] == n and 0.0 <= metrics["Recall@5"] <= 1.0
    qa = json.loads((work / "reports/metrics/demo/qa-bm25.json").read_text())
    assert qa["n_questions"] == n and "F1" in qa and "EM" in qa
    evireform = json.loads((work / "reports/metrics/demo/evireform-full.json").read_text())
    assert evireform["n_questions"] == n
    assert "| evireform-full |" in (work / "reports/README.md").read_text()
    assert "| dense |" in (work / "reports/retrieval.md").read_text()
    second = _run([DVC, "repro"], work, env)
    assert "Running stage" not in second.stdout


@pytest.mark.slow
def test_dense_param_change_invalidates_only_dense_stages(project: tuple[Path, dict[str, str]]) -> None:
    work, env = project
    _run([DVC, "repro"], work, env)
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["retrieval"]["dense"]["top_k"] = 10
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    # DVC sees the change on the one stage that declares the key: params_retrieve_dense ...
    changed = set(json.loads(_run([DVC, "status", "--json"], work, env).stdout))
    assert "params_retrieve_dense" in changed
    assert not {s for s in changed if "bm25" in s or "prepare" in s}
    # ... whose file then changes, and only the dense stages (and their dependants) are out of date
    _run([DVC, "repro", "--glob", "params_*"], work, env)
    changed = set(json.loads(_run([DVC, "status", "--json"], work, env).stdout))
    assert "retrieve_dense@demo" in changed
    assert not {s for s in changed if "bm25" in s or "prepare" in s or s.startswith("params_")}


@pytest.mark.slow
def test_report_rebuilds_from_committed_files_alone(project: tuple[Path, dict[str, str]],
                                                    tmp_path: Path) -> None:
    """A clean clone has reports/ (metrics JSON, per-question tables) but no DVC-cached artifacts:
    the report stage must rebuild the same report there, paired bootstrap CIs included."""
    work, env = project
    _run([DVC, "repro"], work, env)
    clone = tmp_path / "clone"
    shutil.copytree(work, clone, ignore=shutil.ignore_patterns("artifacts", ".dvc", "__pycache__"))
    _run([sys.executable, "-m", "stages.report"], clone, {**env, "PYTHONPATH": str(clone)})
    rebuilt = (clone / "reports/README.md").read_text()
    assert rebuilt == (work / "reports/README.md").read_text()
    assert "## Paired bootstrap: demo" in rebuilt and "Not in these CIs" not in rebuilt
