"""``python -m stages.code_digest <template>``: md5sum lines of the files its code stage lists."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from stages import code_digest
from stages.code_digest import digest, listed_files, load_stages

DVC = """\
stages:
  run:
    cmd: python -m stages.run
    deps:
      - pipeline/code/run.md5
  code_run:
    cmd: python -m stages.code_digest run
    deps:
      - evichain/a.py
      - stages/code_digest.py
      - stages/run.py
    outs:
      - pipeline/code/run.md5:
          cache: false
          persist: true
"""


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for rel, text in {"evichain/a.py": "A = 1\n", "stages/run.py": "print(1)\n",
                      "stages/code_digest.py": "# edits here change no result\n",
                      "dvc.yaml": DVC}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_digest_lists_each_file_md5sum_style_without_the_digest_module(project: Path) -> None:
    assert code_digest.main(["run"]) == 0
    expected = "".join(f"{hashlib.md5((project / f).read_bytes()).hexdigest()}  {f}\n"
                       for f in ("evichain/a.py", "stages/run.py"))
    assert (project / "pipeline/code/run.md5").read_text() == expected


def test_an_edit_changes_the_digest_an_edit_of_the_digest_module_does_not(project: Path) -> None:
    files = listed_files("run", load_stages())
    before = digest(files)
    (project / "stages/code_digest.py").write_text("# another comment\n")
    assert digest(listed_files("run", load_stages())) == before
    (project / "evichain/a.py").write_text("A = 2\n")
    assert digest(files) != before


def test_an_unknown_template_names_the_fix(project: Path) -> None:
    with pytest.raises(SystemExit, match="no stage 'code_nope'.*dvc_deps --write"):
        code_digest.main(["nope"])


def test_the_digest_names_agree_with_the_deps_tool() -> None:
    """scripts/dvc_deps.py reads the project by AST only (it imports nothing of it), so it keeps
    its own copy of the digest folder and the code-stage prefix: they must stay the same."""
    from scripts import dvc_deps

    assert code_digest.DIGEST_DIR.as_posix() == dvc_deps.DIGEST_DIR
    assert code_digest.STAGE_PREFIX == dvc_deps.CODE_PREFIX
    assert code_digest.digest_path("t").as_posix() == dvc_deps.digest_dep("t")
    assert code_digest.SELF == dvc_deps.DIGEST_MODULE.replace(".", "/") + ".py"
