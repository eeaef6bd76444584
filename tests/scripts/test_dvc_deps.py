"""Every dvc.yaml stage template depends on its code digest, and the template's code stage lists,
as source deps, exactly the project files the template's command imports
(``scripts/dvc_deps.py``; AST only, nothing of the project is imported here)."""

from __future__ import annotations

import difflib
import subprocess
import textwrap
from pathlib import Path

import pytest

from scripts.dvc_deps import (ROOT, RewriteError, check, code_stage_block, is_source, main, report,
                              rewrite)

DVC = (ROOT / "dvc.yaml").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- the real dvc.yaml
def test_every_stage_lists_exactly_the_project_files_it_imports() -> None:
    bad = check(DVC)
    assert not bad, ("dvc.yaml source deps are not what the stages import "
                     "(fix: python -m scripts.dvc_deps --write):\n" + report(bad))


def test_rewrite_of_the_real_file_changes_only_source_dep_lines_and_is_idempotent() -> None:
    new = rewrite(DVC)
    assert rewrite(new) == new and not check(new)
    old_lines, new_lines = DVC.splitlines(), new.splitlines()
    changed = [line for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
                   None, old_lines, new_lines, autojunk=False).get_opcodes() if tag != "equal"
               for line in [*old_lines[i1:i2], *new_lines[j1:j2]]]
    assert all(is_source(line.strip().removeprefix("- ")) for line in changed), changed[:5]


def test_source_deps_are_files_not_directories() -> None:
    import yaml

    for name, spec in yaml.safe_load(DVC)["stages"].items():
        body = spec.get("do", spec)
        for dep in body.get("deps", []):
            if isinstance(dep, str) and is_source(dep):
                assert (ROOT / dep).is_file(), f"{name}: {dep}"


# --------------------------------------------------------------------------- a toy project
FILES = {
    "evichain/__init__.py": "",
    "evichain/params_base.py": "X = 1\n",
    "evichain/config.py": """
        import importlib

        from evichain.params_base import X

        def load_params(path="params.yaml"):
            return importlib.import_module("evichain.methods.catalogue")
        """,
    "evichain/typing_only.py": "",
    "evichain/methods/__init__.py": "",
    "evichain/methods/catalogue.py": """
        METHOD_MODULES: dict[str, str] = {"toy": "evichain.methods.toy.method",
                                          "other": "evichain.methods.other.method"}
        BLOCK_MODULES: dict[str, str] = {"toy": "evichain.methods.toy.params",
                                         "other": "evichain.methods.other.params"}
        """,
    "evichain/methods/base.py": """
        import importlib

        from evichain.methods.catalogue import METHOD_MODULES

        def get_method(name):
            return importlib.import_module(METHOD_MODULES[name])
        """,
    "evichain/methods/toy/__init__.py": "",
    "evichain/methods/toy/params.py": "from evichain.params_base import X\n",
    "evichain/methods/toy/helper.py": "",
    "evichain/methods/toy/method.py": """
        from .params import X

        def build():
            from . import helper
        """,
    "evichain/methods/other/__init__.py": "",
    "evichain/methods/other/params.py": "from evichain.params_base import X\n",
    "evichain/methods/other/method.py": "from evichain.methods.other.params import X\n",
    "flows/__init__.py": "",
    "flows/run.py": """
        from evichain.methods.base import get_method

        def run(name):
            return get_method(name)
        """,
    "stages/__init__.py": "",
    "stages/_common.py": "",
    "stages/code_digest.py": "import hashlib\n",
    "stages/plain.py": """
        from typing import TYPE_CHECKING

        from stages._common import *

        if TYPE_CHECKING:
            import evichain.typing_only

        def main():
            from evichain.config import load_params
        """,
    "stages/run_method.py": """
        def main(name):
            from flows.run import run
        """,
    "stages/tune.py": """
        def main():
            from flows.run import run
            return with_runner(run, 4)("other")
        """,
    "stages/computed.py": """
        def main(spec):
            from flows.run import run
            return run(spec.method)
        """,
    "stages/report.py": """
        def main():
            from evichain.config import load_params
            p = load_params()
            return p.other.top_k
        """,
}

PLAIN = ["evichain/__init__.py", "evichain/config.py", "evichain/params_base.py",
         "stages/__init__.py", "stages/_common.py", "stages/code_digest.py", "stages/plain.py"]
RUN = ["evichain/__init__.py", "evichain/methods/__init__.py", "evichain/methods/base.py",
       "evichain/methods/catalogue.py", "evichain/params_base.py", "evichain/methods/toy/__init__.py",
       "evichain/methods/toy/helper.py", "evichain/methods/toy/method.py",
       "evichain/methods/toy/params.py", "flows/__init__.py", "flows/run.py",
       "stages/__init__.py", "stages/code_digest.py", "stages/run_method.py"]

DVC_TOY = """\
# header comment
stages:
  plain:
    matrix:
      dataset: ${datasets}
    cmd: python -m stages.plain --dataset ${item.dataset}
    deps:
      - data
      - artifacts/${item.dataset}/corpus.parquet
      - pipeline/params/plain.json
      - pipeline/code/plain.md5

%(code_plain)s

  params_plain:
    cmd: python -m stages.params_digest plain
    params:
      - data   # a comment
    outs:
      - pipeline/params/plain.json:
          cache: false

  # between stages
  run:
    matrix:
      dataset: [d]
      method: ${toy.methods}
    cmd: python -m stages.run_method --dataset ${item.dataset} --method ${item.method}
    deps:
      - artifacts/${item.dataset}/corpus.parquet
      - pipeline/code/run.md5

%(code_run)s
  shell:
    cmd: echo hi
    deps:
      - evichain
"""


def items(paths: list[str], indent: int = 6) -> str:
    return "\n".join(f"{' ' * indent}- {p}" for p in paths)


def code_stage(template: str, deps: list[str]) -> str:
    """The code stage of ``template`` listing ``deps`` (as ``--write`` writes it)."""
    block = code_stage_block(template)
    at = block.index("    deps:") + 1
    return "\n".join([*block[:at], items(sorted(deps)), *block[at + 1:]])


def toy_dvc(plain: list[str], run: list[str]) -> str:
    return DVC_TOY % {"code_plain": code_stage("plain", plain), "code_run": code_stage("run", run)}


def one_stage(name: str, cmd: str, deps: list[str]) -> str:
    """A dvc.yaml of one template stage and its code stage."""
    return (f"stages:\n  {name}:\n    cmd: {cmd}\n    deps:\n      - pipeline/code/{name}.md5\n\n"
            + code_stage(name, deps) + "\n")


@pytest.fixture()
def toy(tmp_path: Path) -> Path:
    for rel, text in FILES.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    (tmp_path / "params.yaml").write_text("datasets: [a]\ntoy:\n  methods: [toy]\n", encoding="utf-8")
    return tmp_path


def problems(text: str, root: Path, **params: object) -> dict[str, dict[str, list[str]]]:
    kwargs = {"params": params} if params else {}
    return {s.stage: {"missing": s.missing, "extra": s.extra, "problems": s.problems}
            for s in check(text, root, **kwargs)}


def test_exact_deps_pass(toy: Path) -> None:
    assert problems(toy_dvc(PLAIN, RUN), toy) == {}


def test_a_removed_dep_is_reported_missing(toy: Path) -> None:
    assert problems(toy_dvc([p for p in PLAIN if p != "stages/_common.py"], RUN), toy) == {
        "code_plain": {"missing": ["stages/_common.py"], "extra": [], "problems": []}}


def test_an_unused_dep_and_a_directory_are_reported_extra(toy: Path) -> None:
    found = problems(toy_dvc([*PLAIN, "evichain/methods/base.py"],
                             [p for p in RUN if not p.startswith("flows/")] + ["flows"]), toy)
    assert found == {
        "code_plain": {"missing": [], "extra": ["evichain/methods/base.py"], "problems": []},
        "code_run": {"missing": ["flows/__init__.py", "flows/run.py"], "extra": ["flows"], "problems": []}}


def test_lazy_and_relative_imports_count_type_checking_ones_do_not(toy: Path) -> None:
    # plain imports evichain.config inside main() (counted) and evichain.typing_only under
    # TYPE_CHECKING (not); the toy method imports .helper inside build() (counted, in RUN).
    assert "evichain/typing_only.py" not in PLAIN and "evichain/config.py" in PLAIN
    assert problems(toy_dvc([*PLAIN, "evichain/typing_only.py"], RUN), toy)["code_plain"]["extra"] == [
        "evichain/typing_only.py"]


def test_registry_dispatch_adds_only_the_stage_methods(toy: Path) -> None:
    """The --method values (a matrix list or a params.yaml reference) resolve through the
    catalogue to their method modules; config's import of the catalogue by name is not
    followed, so `plain` does not depend on any method."""
    other = ["evichain/methods/other/__init__.py", "evichain/methods/other/method.py",
             "evichain/methods/other/params.py"]
    both = {"datasets": ["a"], "toy": {"methods": ["toy", "other"]}}
    assert problems(toy_dvc(PLAIN, RUN), toy, **both) == {
        "code_run": {"missing": other, "extra": [], "problems": []}}
    assert problems(toy_dvc(PLAIN, [*RUN, *other]), toy, **both) == {}
    unknown = problems(toy_dvc(PLAIN, RUN), toy, datasets=["a"], toy={"methods": ["nope"]})
    assert unknown["code_run"]["problems"] == [
        "method 'nope' is not in the catalogue (evichain.methods.catalogue)"]
    with pytest.raises(RewriteError, match="nope"):
        rewrite(toy_dvc(PLAIN, RUN), toy, params={"datasets": ["a"], "toy": {"methods": ["nope"]}})


def test_a_literal_method_name_is_followed_a_computed_one_needs_the_option(toy: Path) -> None:
    """`with_runner(run, 4)("other")` runs `other` (run passes its parameter on to get_method);
    `run(spec.method)` cannot be resolved without the stage's --method."""
    other = ["evichain/methods/other/__init__.py", "evichain/methods/other/method.py",
             "evichain/methods/other/params.py"]
    base = [p for p in RUN if "/toy/" not in p and p != "stages/run_method.py"]
    dvc = one_stage("tune", "python -m stages.tune", [*base, *other, "stages/tune.py"])
    assert problems(dvc, toy) == {}
    dvc = dvc.replace("stages.tune --", "stages.computed --").replace(
        "python -m stages.tune\n", "python -m stages.computed\n").replace(
        "stages/tune.py", "stages/computed.py")
    assert problems(dvc, toy)["code_tune"]["problems"] == [
        "picks a method by a computed name (stages.computed:3) and its cmd has no --method"]
    assert problems(dvc.replace("stages.computed", "stages.computed --method other"), toy) == {}


def test_a_new_registered_method_is_followed(toy: Path) -> None:
    """A method package added to the catalogue is resolved like the built-in ones."""
    pkg = toy / "evichain" / "methods" / "newm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "method.py").write_text("from evichain.methods.base import get_method\n"
                                   "from evichain.methods.newm import scoring\n")
    (pkg / "scoring.py").write_text("")
    catalogue = toy / "evichain" / "methods" / "catalogue.py"
    catalogue.write_text(catalogue.read_text().replace(
        '"toy": "evichain.methods.toy.method",',
        '"toy": "evichain.methods.toy.method", "newm": "evichain.methods.newm.method",'))
    new = ["evichain/methods/newm/__init__.py", "evichain/methods/newm/method.py",
           "evichain/methods/newm/scoring.py"]
    params = {"datasets": ["a"], "toy": {"methods": ["newm"]}}
    run = [p for p in RUN if "/toy/" not in p and p != "evichain/params_base.py"]
    assert problems(toy_dvc(PLAIN, [*run, *new]), toy, **params) == {}
    written = rewrite(toy_dvc(PLAIN, RUN), toy, params=params)
    assert items(sorted([*run, *new])) in written


def test_a_block_read_adds_the_block_module(toy: Path) -> None:
    """`p.other` (a method block read off the params) makes the block's params module a dep."""
    found = problems(one_stage("report", "python -m stages.report", PLAIN), toy)["code_report"]
    assert found["missing"] == ["evichain/methods/__init__.py", "evichain/methods/catalogue.py",
                                "evichain/methods/other/__init__.py",
                                "evichain/methods/other/params.py", "stages/report.py"]
    assert found["extra"] == ["stages/_common.py", "stages/plain.py"]


def test_write_rewrites_only_source_deps_in_place_and_is_idempotent(toy: Path) -> None:
    text = toy_dvc(["stages/plain.py", "evichain/methods"], ["flows", "stages/report.py"])
    # a source dep between two non-source ones: the non-source deps stay first, in their order
    text = text.replace("      - data\n", "      - data\n      - stages/_common.py\n", 1)
    text = text.replace("      - pipeline/code/run.md5\n", "      - flows/run.py\n", 1)
    new = rewrite(text, toy)
    assert new == toy_dvc(PLAIN, RUN)
    assert rewrite(new, toy) == new and problems(new, toy) == {}
    assert "# header comment" in new and "# between stages" in new and "- data   # a comment" in new


def test_a_comment_among_source_deps_is_refused(toy: Path) -> None:
    text = toy_dvc(PLAIN[1:], RUN).replace("      - stages/plain.py\n",
                                           "      # why\n      - stages/plain.py\n")
    with pytest.raises(RewriteError, match="comment sits among the source deps"):
        rewrite(text, toy)


def test_command_line(toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (toy / "dvc.yaml").write_text(toy_dvc(PLAIN[1:], RUN), encoding="utf-8")
    assert main(["--check", "--root", str(toy)]) == 1
    assert "missing: evichain/__init__.py" in capsys.readouterr().out
    assert main(["--write", "--root", str(toy)]) == 0
    assert main(["--check", "--root", str(toy)]) == 0
    assert (toy / "dvc.yaml").read_text(encoding="utf-8") == toy_dvc(PLAIN, RUN)


def test_write_moves_the_source_deps_of_a_template_to_its_new_code_stage(toy: Path) -> None:
    """The form before code stages (each template listing its imports) becomes the new one:
    the template lists its digest, and a code stage after it lists the files."""
    new_form = toy_dvc(PLAIN, RUN)
    old_form = new_form
    for name, files in (("plain", PLAIN), ("run", RUN)):
        own = [f for f in files if f != "stages/code_digest.py"]  # what the template imports
        old_form = old_form.replace(f"      - pipeline/code/{name}.md5\n", items(own) + "\n")
        old_form = old_form.replace("\n" + code_stage(name, files) + "\n", "")
    assert "code_plain" not in old_form and "pipeline/code" not in old_form
    assert "stages/plain.py" in old_form
    assert rewrite(old_form, toy) == new_form


def test_a_code_stage_without_its_template_is_reported_and_removed(toy: Path) -> None:
    text = toy_dvc(PLAIN, RUN) + code_stage("gone", PLAIN) + "\n"
    assert problems(text, toy) == {"code_gone": {
        "missing": [], "extra": sorted(PLAIN),
        "problems": ["digests 'gone', which is not a python -m stage of dvc.yaml"]}}
    assert rewrite(text, toy) == toy_dvc(PLAIN, RUN)


def test_a_template_without_its_code_stage_is_reported(toy: Path) -> None:
    text = toy_dvc(PLAIN, RUN).replace("\n" + code_stage("run", RUN) + "\n", "")
    assert problems(text, toy)["run"]["problems"] == [
        "no stage code_run running python -m stages.code_digest run "
        "(python -m scripts.dvc_deps --write adds it)"]


def test_every_template_of_the_real_file_has_its_digest_committed() -> None:
    """A fresh clone's ``dvc status`` compares the digests, so each template's is in git. (Its
    content may lag the code: then the code stage's lock entry is stale, which
    ``scripts/lock_check.py`` reports, and ``dvc repro`` re-runs it first.)"""
    from stages.code_digest import digest_path, load_stages

    stages = load_stages(ROOT / "dvc.yaml")
    templates = [n[len("code_"):] for n in stages if n.startswith("code_")]
    assert len(templates) > 30
    tracked = set(subprocess.run(["git", "ls-files", "pipeline/code"], cwd=ROOT, text=True,
                                 capture_output=True, check=True).stdout.split())
    assert not [t for t in templates if digest_path(t).as_posix() not in tracked]
