"""dvc.lock records the committed code, params and results (``scripts/lock_check.py``), and the
committed results survive an interrupted stage (``persist: true``)."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest
import yaml

from scripts.lock_check import KNOWN_STALE, ROOT, check, known_stale, recorded, staleness


# --------------------------------------------------------------------------- the real repository
def test_every_stale_lock_entry_is_a_listed_one() -> None:
    problems = check(ROOT)
    assert not problems, "dvc.lock is out of date:\n" + "\n".join(problems[:20])


def test_committed_outputs_persist_through_a_rerun() -> None:
    """DVC deletes a stage's outputs before running it unless they persist; an interrupted
    stage would then leave a committed result deleted."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    loose = []
    for name, spec in stages.items():
        body = spec.get("do", spec)
        for out in [*(body.get("outs") or []), *(body.get("metrics") or [])]:
            path, opts = next(iter(out.items())) if isinstance(out, dict) else (out, {})
            if path.startswith("reports/") and not opts.get("persist"):
                loose.append(f"{name}: {path}")
    assert not loose, loose


# --------------------------------------------------------------------------- a small repository
def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


SOURCE = "def run() -> int:\n    return 1\n"
RESULT = '{"Recall@5": 0.5}\n'


def _repo(tmp_path: Path, *, lock_source: str = SOURCE, lock_k1: float = 0.9,
          lock_result: str = RESULT, listed: str = "") -> Path:
    (tmp_path / "stages").mkdir(parents=True)
    (tmp_path / "stages" / "run.py").write_text(SOURCE)
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "m.json").write_text(RESULT)
    (tmp_path / "params.yaml").write_text("bm25:\n  k1: 0.9\n")
    (tmp_path / "dvc.yaml").write_text(textwrap.dedent("""\
        stages:
          run:
            matrix:
              dataset: [demo, musique]
            cmd: python -m stages.run --dataset ${item.dataset}
            deps:
              - artifacts/${item.dataset}/corpus.parquet
              - stages/run.py
    """))
    entries = {}
    for dataset in ("demo", "musique"):
        entries[f"run@{dataset}"] = {
            "cmd": f"python -m stages.run --dataset {dataset}",
            "deps": [{"path": f"artifacts/{dataset}/corpus.parquet", "md5": "0" * 32},
                     {"path": "stages/run.py", "md5": _md5(lock_source)}],
            "params": {"params.yaml": {"bm25.k1": lock_k1}},
            "outs": [{"path": "reports/m.json", "md5": _md5(lock_result)}]}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": entries}))
    (tmp_path / "reproduce").mkdir()
    (tmp_path / KNOWN_STALE).write_text(listed)
    return tmp_path


def _reasons(root: Path) -> dict[str, tuple[str, ...]]:
    return {s.stage: s.reasons for s in staleness(root)}


def test_a_fresh_lock_is_fresh_and_data_deps_are_not_compared(tmp_path: Path) -> None:
    root = _repo(tmp_path)  # the artifacts/ dep does not exist and its md5 is made up
    assert _reasons(root) == {"run@demo": (), "run@musique": ()}
    assert check(root) == []


@pytest.mark.parametrize(("change", "reason"), [
    ({"lock_source": "def run() -> int:\n    return 0\n"}, "stages/run.py: modified"),
    ({"lock_k1": 1.2}, "params.yaml bm25.k1: changed"),
    ({"lock_result": '{"Recall@5": 0.25}\n'}, "reports/m.json: committed output differs"),
])
def test_a_change_since_the_lock_makes_its_entries_stale(tmp_path: Path, change: dict,
                                                          reason: str) -> None:
    root = _repo(tmp_path, **change)
    assert all(any(r.startswith(reason) for r in rs) for rs in _reasons(root).values())
    assert len(check(root)) == 2 and "re-run it (make repro)" in check(root)[0]


def test_a_dep_added_to_dvc_yaml_makes_the_entry_stale(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / "stages" / "extra.py").write_text("X = 1\n")
    text = (root / "dvc.yaml").read_text().replace(
        "- stages/run.py", "- stages/extra.py\n      - stages/run.py")
    (root / "dvc.yaml").write_text(text)
    assert _reasons(root)["run@demo"] == ("source deps changed (1 added, 0 removed)",)


def test_listed_entries_may_be_stale_and_must_leave_the_list_once_fresh(tmp_path: Path) -> None:
    stale = _repo(tmp_path / "a", lock_k1=1.2, listed="run@demo  # recorded before k1 moved\nrun@musique\n")
    assert known_stale(stale) == {"run@demo", "run@musique"} and check(stale) == []
    fresh = _repo(tmp_path / "b", listed="run@demo\n")
    assert check(fresh) == [f"run@demo: listed in {KNOWN_STALE} but fresh: take it off the list"]


def test_write_known_lists_exactly_the_stale_entries(tmp_path: Path) -> None:
    from scripts.lock_check import write_known

    root = _repo(tmp_path, lock_k1=1.2)
    assert write_known(root) == 2 and check(root) == []
    assert "run@demo  # params.yaml bm25.k1: changed" in (root / KNOWN_STALE).read_text()


def test_params_compare_as_yaml_1_2_numbers() -> None:
    from scripts.lock_check import same_value

    assert same_value("1e-10", 1e-10) and same_value({"a": ["1e-3", 2]}, {"a": [0.001, 2]})
    assert not same_value("1e-10", 1e-9) and not same_value("x", 0.0) and not same_value(True, 1.0)


def test_recorded_stages_of_some_datasets(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    assert recorded(root) == ["run@demo", "run@musique"]
    assert recorded(root, {"musique"}) == ["run@musique"]


def test_a_changed_code_digest_makes_its_entries_stale(tmp_path: Path) -> None:
    """A template's stages depend on its committed code digest (``stages/code_digest.py``):
    the digest is compared like a source file."""
    root = _repo(tmp_path)
    digest = root / "pipeline" / "code" / "run.md5"
    digest.parent.mkdir(parents=True)
    digest.write_text(f"{_md5(SOURCE)}  stages/run.py\n")
    (root / "dvc.yaml").write_text((root / "dvc.yaml").read_text().replace(
        "- stages/run.py", "- pipeline/code/run.md5"))
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    for entry in lock["stages"].values():
        entry["deps"][1] = {"path": "pipeline/code/run.md5", "md5": _md5(digest.read_text())}
    (root / "dvc.lock").write_text(yaml.safe_dump(lock))
    assert _reasons(root) == {"run@demo": (), "run@musique": ()}
    digest.write_text(f"{_md5('changed')}  stages/run.py\n")
    assert _reasons(root)["run@demo"] == ("pipeline/code/run.md5: modified",)
