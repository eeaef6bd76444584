"""Every dvc.yaml stage lists, as deps, the project source files its command imports.

Static check (AST only, nothing of the project is imported): for each stage whose ``cmd`` is
``python -m <project module>``, follow the module's imports transitively (module level and
inside functions, absolute and relative; ``if TYPE_CHECKING:`` blocks are skipped since they
never run) over the project packages, and require each reached file to be covered by a dep:
the dep equals the file or is a directory above it.

A stage module that imports its worker by name (:data:`DISPATCHERS`: ``stages.retrieve_method``
imports the flow of its ``--method``'s family with ``importlib``) also reaches the modules its
literal tables name for the stage's methods: the ``--method`` of the cmd, or each value of the
stage's ``method`` matrix (a list, or a ``${...}`` reference into ``params.yaml``).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = ("evichain", "flows", "stages")
_CMD = re.compile(r"^\s*python\s+-m\s+([\w.]+)")
DISPATCHERS: dict[str, str] = {"stages.retrieve_method": "--method"}
"""Stage modules that import a worker module by name, and the option that selects it: the
module's literal ``METHODS`` (option value → family) and ``FLOWS`` (family → module)."""


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """The source file of project module ``name`` (``a/b.py`` or ``a/b/__init__.py``), if any."""
    if name.split(".")[0] not in PROJECT_PACKAGES:
        return None
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _is_type_checking(test: ast.expr) -> bool:
    """True for ``TYPE_CHECKING`` and ``typing.TYPE_CHECKING``."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """All nodes of ``tree`` except those only reachable under ``if TYPE_CHECKING:``."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))
    return out


@functools.cache
def imported_modules(name: str, root: Path = ROOT) -> frozenset[str]:
    """Dotted names (candidates; not all need be project modules) imported by module ``name``."""
    path = module_file(name, root)
    assert path is not None, name
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)  # c may be a submodule
    return frozenset(found)


def import_closure(name: str, root: Path = ROOT) -> set[Path]:
    """Project files loaded by importing ``name``: its imports, transitively, plus every
    parent package's ``__init__.py``."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        mod = todo.pop()
        parts = mod.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a, a.b, a.b.c
            prefix = ".".join(parts[:i])
            if prefix not in seen and module_file(prefix, root) is not None:
                seen.add(prefix)
                todo.extend(imported_modules(prefix, root))
    return {module_file(mod, root) for mod in seen}  # type: ignore[misc]


def module_literal(name: str, variable: str, root: Path = ROOT) -> Any:
    """The value of module ``name``'s top-level ``variable = <literal>`` (read from the AST)."""
    path = module_file(name, root)
    assert path is not None, name
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == variable and node.value is not None:
            return ast.literal_eval(node.value)
    raise LookupError(f"{name} has no literal {variable}")


def _params_value(ref: str, params: dict[str, Any]) -> Any:
    """``${a.b}`` → ``params["a"]["b"]``."""
    value: Any = params
    for part in ref.strip()[2:-1].split("."):
        value = value[part]
    return value


def stage_options(cmd: str, option: str, matrix: dict[str, Any] | None,
                  params: dict[str, Any]) -> list[str]:
    """Values the cmd's ``option`` takes: a literal, or ``${item.<key>}`` over the matrix."""
    found = re.search(rf"{re.escape(option)}\s+(\S+)", cmd)
    assert found, f"{option} missing from {cmd!r}"
    value = found.group(1)
    item = re.fullmatch(r"\$\{item\.(\w+)\}", value)
    if item is None:
        return [value]
    values = (matrix or {})[item.group(1)]
    if isinstance(values, str):
        values = _params_value(values, params)
    return [str(v) for v in values]


def dispatched_modules(module: str, cmd: str, matrix: dict[str, Any] | None,
                       params: dict[str, Any], root: Path = ROOT) -> set[str]:
    """Modules a :data:`DISPATCHERS` stage imports by name for this cmd (none for others)."""
    if module not in DISPATCHERS:
        return set()
    families = module_literal(module, "METHODS", root)
    flows = module_literal(module, "FLOWS", root)
    out = set()
    for value in stage_options(cmd, DISPATCHERS[module], matrix, params):
        assert value in families, f"{module}: unknown {DISPATCHERS[module]} {value!r}"
        out.add(flows[families[value]])
    return out


def _dep_path(dep: Any) -> str:
    """A dep entry's path (entries may be ``path`` or ``{path: {options}}``)."""
    return next(iter(dep)) if isinstance(dep, dict) else str(dep)


def covered(rel: str, deps: list[str]) -> bool:
    """Whether file ``rel`` equals a dep or lies in a dep directory."""
    return any(rel == d or rel.startswith(d.rstrip("/") + "/") for d in deps)


def missing_deps(dvc: dict[str, Any], root: Path = ROOT,
                 params: dict[str, Any] | None = None) -> dict[str, list[str]]:
    """``{stage: [project files imported by its cmd but not covered by its deps]}``.

    Stages whose ``cmd`` is not ``python -m <project module>`` are skipped. ``artifacts/``
    deps are data and templated deps (``${...}``) cannot name a fixed source path, so neither
    counts as covering anything. Stages with nothing missing are left out.
    """
    if params is None:
        params_file = root / "params.yaml"
        params = yaml.safe_load(params_file.read_text(encoding="utf-8")) if params_file.is_file() else {}
    result: dict[str, list[str]] = {}
    for stage, spec in (dvc.get("stages") or {}).items():
        body = spec.get("do", spec)  # foreach stages keep cmd/deps under ``do``
        cmd = body.get("cmd", "")
        cmd = cmd if isinstance(cmd, str) else cmd[0]
        match = _CMD.match(cmd)
        if not match or module_file(match.group(1), root) is None:
            continue
        deps = [
            d for d in map(_dep_path, body.get("deps") or [])
            if "${" not in d and not d.startswith("artifacts/")
        ]
        module = match.group(1)
        closure = import_closure(module, root)
        for worker in dispatched_modules(module, cmd, spec.get("matrix"), params, root):
            closure |= import_closure(worker, root)
        files = sorted(p.relative_to(root).as_posix() for p in closure)
        missing = [f for f in files if not covered(f, deps)]
        if missing:
            result[stage] = missing
    return result


def _load_dvc() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))


def test_every_stage_lists_the_project_files_it_imports() -> None:
    missing = missing_deps(_load_dvc())
    report = "".join(
        f"  {stage}:\n" + "".join(f"    - {f}\n" for f in files) for stage, files in missing.items()
    )
    assert not missing, f"dvc.yaml stages import project files not covered by their deps:\n{report}"


def test_checker_reports_a_removed_dep() -> None:
    dvc = _load_dvc()
    deps = dvc["stages"]["retrieve_graph"]["deps"]
    assert "flows/read.py" in deps
    deps.remove("flows/read.py")
    assert missing_deps(dvc).get("retrieve_graph") == ["flows/read.py"]


def test_foreach_stages_are_checked_and_other_commands_skipped() -> None:
    dvc = {"stages": {
        "each": {"foreach": ["a"], "do": {"cmd": "python -m stages.prepare --dataset ${item}",
                                           "deps": ["evichain", "flows", "stages/${item}.py"]}},
        "shell": {"cmd": "echo hi", "deps": []},
        "external": {"cmd": "python -m json.tool x", "deps": []},
    }}
    expected = ["stages/__init__.py", "stages/_common.py", "stages/prepare.py"]
    assert missing_deps(dvc) == {"each": expected}


def test_import_closure_follows_lazy_and_package_imports() -> None:
    files = {p.relative_to(ROOT).as_posix() for p in import_closure("stages.retrieve_graph")}
    # stages/_common.py is imported at module level; evichain.config pulls in every params module.
    assert {"stages/__init__.py", "stages/_common.py", "evichain/config.py",
            "evichain/methods/cee/params.py"} <= files


def test_dispatched_flow_is_checked_per_method() -> None:
    """A retrieve_method stage needs its own family's flow, not the others'."""
    dvc = _load_dvc()
    deps = dvc["stages"]["retrieve_graph"]["deps"]
    assert "flows/graph.py" in deps and "flows/cee.py" not in deps
    deps.remove("flows/graph.py")
    assert missing_deps(dvc).get("retrieve_graph") == ["flows/graph.py"]
    rerank = {"stages": {"r": {"matrix": {"dataset": ["d"], "method": "${rerank.methods}"},
                               "cmd": "python -m stages.retrieve_method --dataset ${item.dataset} "
                                      "--method ${item.method}",
                               "deps": ["evichain", "stages"]}}}
    assert missing_deps(rerank, params={"rerank": {"methods": ["listwise"]}}) == {
        "r": ["flows/__init__.py", "flows/common.py", "flows/questions.py", "flows/read.py",
              "flows/rerank.py", "flows/retrieve.py"]}
    evireform = {"stages": {"e": {"cmd": "python -m stages.retrieve_method --dataset d "
                                         "--method evireform --variant full",
                                  "deps": ["evichain", "stages", "flows/__init__.py",
                                           "flows/common.py", "flows/questions.py",
                                           "flows/retrieve.py"]}}}
    assert missing_deps(evireform, params={}) == {"e": ["flows/evireform.py"]}
