"""A stage's source deps are exactly the project files its command imports (a pipeline check).

    python -m scripts.dvc_deps --check   # per stage: missing and extra source deps; exit 1 if any
    python -m scripts.dvc_deps --write   # rewrite the deps lists of dvc.yaml in place

Static (AST only: nothing of the project is imported, so it runs in a fraction of a second).

The files are listed once per stage *template* (a ``dvc.yaml`` stage, with all its matrix or
foreach items), on a generated stage ``code_<template>`` that runs ``python -m
stages.code_digest <template>`` and writes their md5s to ``pipeline/code/<template>.md5``; the
template lists that digest as its one source dep. DVC thus checks each file once per template,
not once per stage, and the lock holds each list once (``stages/code_digest.py`` says why).
``--write`` adds a missing code stage right after its template, removes one whose template is
gone, and moves a template's own source deps to its code stage.

Params the same way: a template's ``params.yaml`` keys are declared once, on a hand-written
stage ``params_<template>`` (``python -m stages.params_digest <template>``, a matrix over the
item fields its keys name), whose output ``pipeline/params/<template>[/<item>].json`` the
template's stages depend on; ``--check`` fails on a template that declares keys itself
(:func:`params_problems`). Params stages are not templates: they get no code stage.

For each template of ``dvc.yaml`` (a stage whose ``cmd`` is ``python -m <project module>``),
the expected source deps of its code stage (files under ``evichain/``, ``flows/``,
``stages/``, one entry per file, sorted; plus the digest module's own) are:

1. the import closure of the module: its imports, transitively, at module level and inside
   functions, absolute and relative, plus every parent package's ``__init__.py``;
   ``if TYPE_CHECKING:`` blocks are skipped, they never run;
2. modules the closure imports *by name*, resolved through the literal catalogue
   ``evichain/methods/catalogue.py`` (read from the source):

   * registry dispatch: a method is picked by name with ``get_method(name)`` or through a
     function that passes one of its parameters on to it (``run_method(paths, method, ...)``;
     found by a fixpoint over the functions of the closure, by name, including calls through
     a runner, ``with_runner(f, ...)(...)``). Where such a call passes a literal
     (``run_method(paths, "proprag", ...)``), that method's module (``METHOD_MODULES``) and its
     closure are added. Where it passes on a parameter or a computed name, the stage's
     ``--method`` option says which methods run: a literal, ``${item.<key>}`` over the stage's
     matrix, ``${item}`` over its foreach list, or a ``${<key>}`` reference into
     ``params.yaml`` (a matrix value may itself be such a reference); a computed name in a
     stage without ``--method``, or a method the catalogue does not list, is an error;
   * block reads: where a module of the closure reads a method's params block off the params
     (``params.rerank``, ``p.graph``, ``load_params(f).evireform``, ``params.block("cee")``),
     the block's params module (``BLOCK_MODULES``), its closure and the catalogue are added:
     the block's defaults are part of what the stage computes. :mod:`evichain.config` loads
     every block's module by name to *validate* it; that is not followed, since validation
     of another method's block cannot change a stage's outputs (nor is ``methods()``, the
     registry's listing of every method, used to list or validate names).

   Both repeat until nothing new is reached.

Non-source deps (``artifacts/...``, ``data``, ``reports/...``, ``reproduce/...``) are kept as
they are, in their place, before the source deps. ``--write`` rewrites only the lines of each
stage's ``deps:`` block (every other line and comment stays; it refuses a deps block with a
comment among its source deps) and is idempotent; it re-reads ``dvc.yaml`` right before writing
and checks that the rewritten file loads to the same stages except for their source deps.

``tests/scripts/test_dvc_deps.py`` runs ``--check`` on the real ``dvc.yaml``.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SOURCE_PACKAGES: tuple[str, ...] = ("evichain", "flows", "stages")
"""Top-level project packages: a dep under one of them is a source dep."""
CATALOGUE = "evichain.methods.catalogue"
"""The module whose literals ``METHOD_MODULES`` / ``BLOCK_MODULES`` resolve imports by name."""
REGISTRY = "evichain.methods.base"
"""The registry module, whose ``get_method(name)`` imports a method's module by name."""
DISPATCH_NAME = "get_method"
METHOD_OPTION = "--method"
"""The stage option that names the method a dispatching stage runs."""
PARAMS_RECEIVERS: frozenset[str] = frozenset({"params", "p", "P", "PARAMS"})
"""Names the project gives a :class:`evichain.config.Params` (``params.rerank`` is a block read)."""
PARAMS_LOADERS: frozenset[str] = frozenset({"load_params", "parse_params"})

_PYTHON_M = re.compile(r"^\s*python3?\s+-m\s+([\w.]+)")


DIGEST_MODULE = "stages.code_digest"
"""The command of a code stage: ``python -m stages.code_digest <template>``."""
CODE_PREFIX = "code_"
"""``code_<template>`` lists the template's source deps and writes its digest."""
DIGEST_DIR = "pipeline/code"
"""Where ``code_<template>`` writes ``<template>.md5`` (committed)."""


PARAMS_MODULE = "stages.params_digest"
"""The command of a params stage: ``python -m stages.params_digest <template> [--item ...]``."""
PARAMS_PREFIX = "params_"
"""``params_<template>`` declares the template's ``params.yaml`` keys and writes their values."""
PARAMS_DIR = "pipeline/params"
"""Where ``params_<template>`` writes ``<template>.json`` or ``<template>/<item>.json``."""


def _module_args(spec: dict[str, Any], module: str) -> list[str] | None:
    """The arguments of a stage whose one command is ``python -m <module> ...``; None for any
    other stage."""
    cmds = _commands(spec)
    words = cmds[0].split() if len(cmds) == 1 else []
    if words[:3] not in (["python", "-m", module], ["python3", "-m", module]):
        return None
    return words[3:]


def params_template(stage: str, spec: dict[str, Any]) -> str | None:
    """The template a params stage writes the values of (its command is ``python -m
    stages.params_digest <t> ...``); None for any other stage."""
    args = _module_args(spec, PARAMS_MODULE)
    return None if args is None else (args[0] if args else "")


def params_problems(dvc: dict[str, Any]) -> list[str]:
    """A template that declares ``params.yaml`` keys itself (DVC would parse ``params.yaml`` for
    each of its stages), or depends on a params file without a ``params_<template>`` stage."""
    stages = dvc.get("stages") or {}
    problems = []
    for name, spec in stages.items():
        if params_template(name, spec) is not None or code_template(name, spec) is not None:
            continue
        body = spec.get("do", spec)
        own = [k for k in body.get("params") or [] if isinstance(k, str)]
        if own:
            problems.append(f"{name}: declares params.yaml keys ({own[0]}, ...); declare them on "
                            f"{PARAMS_PREFIX}{name} (python -m {PARAMS_MODULE}) and depend on its file")
        uses = [d for d in map(dep_path, body.get("deps") or []) if d.startswith(PARAMS_DIR + "/")]
        if uses and params_template(PARAMS_PREFIX + name, stages.get(PARAMS_PREFIX + name, {})) != name:
            problems.append(f"{name}: depends on {uses[0]} but no stage {PARAMS_PREFIX}{name} "
                            f"runs python -m {PARAMS_MODULE} {name}")
    return problems


def digest_dep(template: str) -> str:
    """The one code dep of every stage of ``template``: ``pipeline/code/<template>.md5``."""
    return f"{DIGEST_DIR}/{template}.md5"


def is_source(dep: str) -> bool:
    """Whether dep path ``dep`` stands for project source: a file under a project package (or
    the package) or a code digest (which stands for the files its code stage lists)."""
    return dep.split("/")[0] in SOURCE_PACKAGES or dep.startswith(DIGEST_DIR + "/")


def dep_path(dep: Any) -> str:
    """A dep entry's path (entries may be ``path`` or ``{path: {options}}``)."""
    return next(iter(dep)) if isinstance(dep, dict) else str(dep)


# --------------------------------------------------------------------------- the import walk
def _is_type_checking(test: ast.expr) -> bool:
    """True for ``TYPE_CHECKING`` and ``typing.TYPE_CHECKING``."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def runtime_nodes(tree: ast.AST) -> list[ast.AST]:
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


Arg = tuple[str, Any]
"""A call argument as the dispatch analysis sees it: ``("const", value)`` for a literal,
``("name", id)`` for a plain variable, ``("other", None)`` for anything else."""


@dataclass(frozen=True)
class Call:
    """A call with arguments: the called name (``f`` of ``f(...)`` / ``x.f(...)``), its
    arguments, the functions around it (outermost first; empty at module level) and its line."""

    callee: str
    args: tuple[Arg, ...]
    keywords: tuple[tuple[str, Arg], ...]
    callers: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class ModuleInfo:
    """What the walk needs of one module: the dotted names it imports (candidates: ``from a
    import b`` gives ``a`` and ``a.b``, which may be a submodule), the attribute names it reads
    off a params object (block candidates), its functions (name, parameter names) and its calls
    with arguments (for the registry dispatch)."""

    imports: frozenset[str]
    reads: frozenset[str]
    functions: tuple[tuple[str, tuple[str, ...]], ...]
    calls: tuple[Call, ...]


def _arg(node: ast.expr) -> Arg:
    if isinstance(node, ast.Constant):
        return ("const", node.value)
    if isinstance(node, ast.Name):
        return ("name", node.id)
    return ("other", None)


_WRAPPED = frozenset({"fn", "submit", "map", "with_options"})
"""Attributes of a function that call it (Prefect: ``task.fn(...)``, ``flow.with_options(...)(...)``)."""


def _callee(func: ast.expr) -> str | None:
    """The function a call runs: ``f`` of ``f(...)``, ``x.f(...)``, ``f.fn(...)``,
    ``f.with_options(...)(...)`` and ``wrapper(f, ...)(...)`` (a runner wrapping ``f``)."""
    if isinstance(func, ast.Call):
        inner = func.func
        if isinstance(inner, ast.Attribute) and inner.attr in _WRAPPED and isinstance(inner.value, ast.Name):
            return inner.value.id
        return func.args[0].id if func.args and isinstance(func.args[0], ast.Name) else None
    if isinstance(func, ast.Attribute):
        if func.attr in _WRAPPED and isinstance(func.value, ast.Name):
            return func.value.id
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def _params(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    a = node.args
    return tuple(x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs])


def _block_read(node: ast.AST) -> str | None:
    """``params.<x>`` / ``p.<x>`` / ``self.params.<x>`` / ``load_params(f).<x>`` → ``x``;
    ``<params>.block("x.y")`` → ``x``; else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "block" and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str):
        return node.args[0].value.split(".")[0]
    if not isinstance(node, ast.Attribute):
        return None
    owner = node.value
    if isinstance(owner, ast.Name) and owner.id in PARAMS_RECEIVERS:
        return node.attr
    if isinstance(owner, ast.Attribute) and owner.attr == "params":
        return node.attr
    if isinstance(owner, ast.Call):
        func = owner.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in PARAMS_LOADERS:
            return node.attr
    return None


class Project:
    """The source tree under ``root``, its modules read once each."""

    def __init__(self, root: Path = ROOT) -> None:
        self.root = Path(root)
        self._info: dict[str, ModuleInfo] = {}
        self._files: dict[str, Path | None] = {}
        self._catalogue: tuple[dict[str, str], dict[str, str]] | None = None

    # ---- modules
    def module_file(self, name: str) -> Path | None:
        """The source file of project module ``name`` (``a/b.py`` or ``a/b/__init__.py``)."""
        if name not in self._files:
            found = None
            if name.split(".")[0] in SOURCE_PACKAGES:
                base = self.root.joinpath(*name.split("."))
                for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                    if candidate.is_file():
                        found = candidate
                        break
            self._files[name] = found
        return self._files[name]

    def rel(self, name: str) -> str:
        path = self.module_file(name)
        assert path is not None, name
        return path.relative_to(self.root).as_posix()

    def info(self, name: str) -> ModuleInfo:
        """What module ``name`` imports and reads, its functions and calls (runtime code only:
        ``if TYPE_CHECKING:`` blocks are skipped)."""
        if name not in self._info:
            path = self.module_file(name)
            assert path is not None, name
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            imports: set[str] = set()
            reads: set[str] = set()
            functions: list[tuple[str, tuple[str, ...]]] = []
            calls: list[Call] = []
            stack: list[tuple[ast.AST, tuple[str, ...]]] = [
                (ast.parse(path.read_text(encoding="utf-8"), str(path)), ())]
            while stack:
                node, caller = stack.pop()
                if isinstance(node, ast.If) and _is_type_checking(node.test):
                    stack.extend((n, caller) for n in node.orelse)
                    continue
                inner = caller
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    functions.append((node.name, _params(node)))
                    inner = (*caller, node.name)
                elif isinstance(node, ast.Import):
                    imports.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom):
                    if node.level:
                        parts = package.split(".")
                        base = ".".join(parts[: len(parts) - node.level + 1])
                        target = f"{base}.{node.module}" if node.module else base
                    else:
                        target = node.module or ""
                    imports.add(target)
                    imports.update(f"{target}.{alias.name}" for alias in node.names)
                else:
                    read = _block_read(node)
                    if read is not None:
                        reads.add(read)
                    if isinstance(node, ast.Call) and (node.args or node.keywords):
                        callee = _callee(node.func)
                        if callee is not None:
                            calls.append(Call(callee, tuple(_arg(x) for x in node.args),
                                              tuple((k.arg, _arg(k.value)) for k in node.keywords
                                                    if k.arg is not None), caller, node.lineno))
                stack.extend((child, inner) for child in ast.iter_child_nodes(node))
            self._info[name] = ModuleInfo(frozenset(imports), frozenset(reads),
                                          tuple(functions), tuple(calls))
        return self._info[name]

    def closure(self, names: Iterable[str]) -> set[str]:
        """Project modules loaded by importing ``names``: their imports, transitively, with
        every parent package."""
        seen: set[str] = set()
        todo = list(names)
        while todo:
            parts = todo.pop().split(".")
            for i in range(1, len(parts) + 1):  # importing a.b.c runs a, a.b, a.b.c
                prefix = ".".join(parts[:i])
                if prefix not in seen and self.module_file(prefix) is not None:
                    seen.add(prefix)
                    todo.extend(self.info(prefix).imports)
        return seen

    # ---- the catalogue
    def catalogue(self) -> tuple[dict[str, str], dict[str, str]]:
        """``(METHOD_MODULES, BLOCK_MODULES)`` of the catalogue, read from its source."""
        if self._catalogue is None:
            path = self.module_file(CATALOGUE)
            values: dict[str, Any] = {"METHOD_MODULES": {}, "BLOCK_MODULES": {}}
            if path is not None:
                for node in ast.parse(path.read_text(encoding="utf-8")).body:
                    target = node.target if isinstance(node, ast.AnnAssign) else (
                        node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1
                        else None)
                    if isinstance(target, ast.Name) and target.id in values and node.value is not None:
                        values[target.id] = ast.literal_eval(node.value)
            self._catalogue = (dict(values["METHOD_MODULES"]), dict(values["BLOCK_MODULES"]))
        return self._catalogue

    # ---- the registry dispatch
    def dispatch(self, modules: Iterable[str]) -> tuple[bool, set[str], list[str]]:
        """How ``modules`` pick methods by name: ``(open, literals, computed)``.

        A *dispatcher* is ``get_method`` or a function that passes one of its parameters on to
        a dispatcher's method parameter (``run_method(paths, method, ...)``), found by a fixpoint
        over the functions of ``modules`` (by name). A call of a dispatcher passes the method as
        a literal (``run_method(paths, "proprag", ...)``: in ``literals``), forwards its own
        caller's parameter (a chain up to the command's ``--method``: ``open`` is True), or
        computes it (``computed``: ``module:line`` of each such call).
        """
        modules = sorted(modules)
        defs: dict[tuple[str, str], tuple[str, ...]] = {(REGISTRY, DISPATCH_NAME): ("name",)}
        for m in modules:
            for fname, fparams in self.info(m).functions:
                defs.setdefault((m, fname), fparams)  # the first def of a name in a module
        found: dict[tuple[str, str], str] = {(REGISTRY, DISPATCH_NAME): "name"}

        def method_arg(call: Call) -> Arg | None:
            keywords = dict(call.keywords)
            for key, pname in found.items():
                if key[1] != call.callee:
                    continue
                if pname in keywords:
                    return keywords[pname]
                fparams = defs.get(key, ())
                if pname in fparams:
                    pos = fparams.index(pname) - (1 if fparams[0] in ("self", "cls") else 0)
                    if 0 <= pos < len(call.args):
                        return call.args[pos]
            return None

        def owner(m: str, call: Call, name: str) -> tuple[str, str] | None:
            """The innermost function around ``call`` with a parameter ``name``."""
            for fname in reversed(call.callers):
                if name in defs.get((m, fname), ()):
                    return (m, fname)
            return None

        sites = [(m, c) for m in modules for c in self.info(m).calls]
        changed = True
        while changed:
            changed = False
            for m, call in sites:
                arg = method_arg(call)
                if arg is None or arg[0] != "name":
                    continue
                key = owner(m, call, arg[1])
                if key is not None and key not in found:
                    found[key] = arg[1]
                    changed = True
        is_open, literals, computed = False, set(), []
        for m, call in sites:
            arg = method_arg(call)
            if arg is None:
                continue
            if arg[0] == "const" and isinstance(arg[1], str):
                literals.add(arg[1])
            elif arg[0] == "name" and found.get(owner(m, call, arg[1]) or ("", "")) == arg[1]:
                is_open = True
            else:
                computed.append(f"{m}:{call.line}")
        return is_open, literals, computed

    # ---- one command
    def command_modules(self, module: str, methods: list[str] | None,
                        unresolved: str | None = None) -> tuple[set[str], list[str]]:
        """Modules command ``python -m module`` loads, running ``methods`` (its ``--method``
        values; None when it has no such option, ``unresolved`` saying why when they could not
        be resolved), and the problems found."""
        method_modules, block_modules = self.catalogue()
        problems: list[str] = []
        loaded = self.closure([module])
        while True:
            is_open, names, computed = self.dispatch(loaded)
            if is_open or computed:
                if unresolved is not None:
                    problems.append(unresolved)
                elif methods is not None:
                    names |= set(methods)
                elif computed:
                    problems.append(f"picks a method by a computed name ({', '.join(computed)}) "
                                    f"and its cmd has no {METHOD_OPTION}")
            wanted: set[str] = set()
            for method in sorted(names):
                target = method_modules.get(method)
                if target is None:
                    problems.append(f"method {method!r} is not in the catalogue ({CATALOGUE})")
                else:
                    wanted.add(target)
            for read in set().union(*(self.info(m).reads for m in loaded)):
                if read in block_modules:
                    wanted.update((block_modules[read], CATALOGUE))
            new = self.closure(wanted) - loaded
            if not new:
                return loaded, sorted(set(problems))
            loaded |= new


# --------------------------------------------------------------------------- stage options
def _params_value(key: str, params: dict[str, Any]) -> Any:
    """``a.b`` → ``params["a"]["b"]`` (a KeyError names the key)."""
    value: Any = params
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(f"${{{key}}} is not in params.yaml")
        value = value[part]
    return value


def _resolve(value: Any, params: dict[str, Any]) -> list[str]:
    """A matrix / foreach value: a list, or a ``${key}`` reference to one in params.yaml."""
    if isinstance(value, str):
        ref = re.fullmatch(r"\$\{\s*([\w.]+)\s*\}", value)
        if ref is None:
            return [value]
        value = _params_value(ref.group(1), params)
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def option_values(cmd: str, option: str, spec: dict[str, Any], params: dict[str, Any]) -> list[str] | None:
    """The values ``option`` takes over a stage's matrix / foreach (None when the cmd lacks it)."""
    found = re.search(rf"(?:^|\s){re.escape(option)}(?:\s+|=)(\S+)", cmd)
    if found is None:
        return None
    value = found.group(1)
    if "${" not in value:
        return [value]
    item = re.fullmatch(r"\$\{\s*item(?:\.(\w+))?\s*\}", value)
    if item is not None:
        if item.group(1) is None:
            return _resolve(spec.get("foreach", []), params)
        return _resolve((spec.get("matrix") or {})[item.group(1)], params)
    ref = re.fullmatch(r"\$\{\s*([\w.]+)\s*\}", value)
    if ref is not None:
        return _resolve(_params_value(ref.group(1), params), params)
    raise ValueError(f"cannot resolve {option} {value!r}")


# --------------------------------------------------------------------------- the check
@dataclass
class StageDeps:
    """One stage's source deps: what it lists and what its command imports."""

    stage: str
    listed: list[str]
    expected: list[str]
    problems: list[str] = field(default_factory=list)

    @property
    def missing(self) -> list[str]:
        return [f for f in self.expected if f not in self.listed]

    @property
    def extra(self) -> list[str]:
        return sorted({d for d in self.listed if d not in self.expected})

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.problems)


def _commands(spec: dict[str, Any]) -> list[str]:
    body = spec.get("do", spec)  # foreach stages keep cmd/deps under ``do``
    cmd = body.get("cmd", "")
    return [cmd] if isinstance(cmd, str) else [str(c) for c in cmd]


def code_template(stage: str, spec: dict[str, Any]) -> str | None:
    """The template a code stage digests (its command is ``python -m stages.code_digest <t>``;
    its name should be ``code_<t>``); None for any other stage."""
    args = _module_args(spec, DIGEST_MODULE)
    return None if args is None else (args[0] if len(args) == 1 else "")


def template_modules(dvc: dict[str, Any], params: dict[str, Any],
                     project: Project) -> dict[str, tuple[set[str], list[str]]]:
    """Every template stage (``python -m <project module>``, code stages aside): the modules
    its command loads, over its ``--method`` values, and the problems found."""
    out: dict[str, tuple[set[str], list[str]]] = {}
    for stage, spec in (dvc.get("stages") or {}).items():
        if code_template(stage, spec) is not None or params_template(stage, spec) is not None:
            continue
        modules: set[str] = set()
        problems: list[str] = []
        checked = False
        for cmd in _commands(spec):
            match = _PYTHON_M.match(cmd)
            if not match or project.module_file(match.group(1)) is None:
                continue
            checked = True
            unresolved = None
            try:
                methods = option_values(cmd, METHOD_OPTION, spec, params)
            except (KeyError, ValueError) as exc:
                methods, unresolved = [], str(exc.args[0])
            loaded, found = project.command_modules(match.group(1), methods, unresolved)
            modules |= loaded
            problems += found
        if checked:
            out[stage] = (modules, problems)
    return out


def stage_deps(dvc: dict[str, Any], params: dict[str, Any], project: Project) -> list[StageDeps]:
    """Every template stage and code stage of ``dvc`` (a loaded dvc.yaml), in file order.

    A template lists one code dep, its digest (``pipeline/code/<template>.md5``); its code
    stage ``code_<template>`` lists the files the template's command imports (and the digest
    module's own)."""
    stages = dvc.get("stages") or {}
    templates = template_modules(dvc, params, project)
    digester = project.closure([DIGEST_MODULE]) if project.module_file(DIGEST_MODULE) else set()
    out: list[StageDeps] = []
    for stage, spec in stages.items():
        body = spec.get("do", spec)
        listed = [d for d in map(dep_path, body.get("deps") or []) if is_source(d)]
        template = code_template(stage, spec)
        if template is not None:
            if stage != CODE_PREFIX + template:
                out.append(StageDeps(stage, listed, [], [
                    f"a code stage must be named {CODE_PREFIX}<template> and digest <template>"]))
                continue
            if template not in templates:
                out.append(StageDeps(stage, listed, [], [f"digests {template!r}, which is not a "
                                                         "python -m stage of dvc.yaml"]))
                continue
            modules, problems = templates[template]
            expected = sorted({project.rel(m) for m in modules | digester})
            out.append(StageDeps(stage, listed, expected, list(problems)))
        elif stage in templates:
            missing = CODE_PREFIX + stage not in stages or code_template(
                CODE_PREFIX + stage, stages[CODE_PREFIX + stage]) != stage
            out.append(StageDeps(stage, listed, [digest_dep(stage)], [
                f"no stage {CODE_PREFIX}{stage} running python -m {DIGEST_MODULE} {stage}"
                " (python -m scripts.dvc_deps --write adds it)"] if missing else []))
    return out


def load_params_file(root: Path) -> dict[str, Any]:
    path = root / "params.yaml"
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.is_file() else {}


def check(text: str, root: Path = ROOT, params: dict[str, Any] | None = None) -> list[StageDeps]:
    """The stages of dvc.yaml ``text`` whose source deps are not exactly what they import."""
    params = load_params_file(root) if params is None else params
    dvc = yaml.safe_load(text) or {}
    bad = [s for s in stage_deps(dvc, params, Project(root)) if not s.ok]
    return bad + [StageDeps(p.split(":", 1)[0], [], [], [p.split(": ", 1)[1]])
                  for p in params_problems(dvc)]


def report(bad: list[StageDeps]) -> str:
    lines = []
    for s in bad:
        lines.append(f"{s.stage}:")
        lines += [f"  problem: {p}" for p in s.problems]
        lines += [f"  missing: {f}" for f in s.missing]
        lines += [f"  extra:   {f}" for f in s.extra]
    return "\n".join(lines)


# --------------------------------------------------------------------------- the rewrite
class RewriteError(ValueError):
    """dvc.yaml text the rewrite cannot change safely (the message says where)."""


_STAGE = re.compile(r"^  (?P<name>[^\s#:][^:]*):\s*(#.*)?$")
_DEPS = re.compile(r"^(?P<indent>\s+)deps:\s*(#.*)?$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _stage_spans(lines: list[str]) -> dict[str, tuple[int, int]]:
    """Stage name → (first line, end line) of its block under top-level ``stages:``."""
    spans: dict[str, tuple[int, int]] = {}
    try:
        start = next(i for i, line in enumerate(lines) if re.match(r"^stages:\s*(#.*)?$", line))
    except StopIteration:
        return spans
    current: tuple[str, int] | None = None
    end = len(lines)
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line.strip() and not line.startswith(" ") and not line.startswith("#"):
            end = i  # the next top-level key
            break
        match = _STAGE.match(line)
        if match:
            if current is not None:
                spans[current[0]] = (current[1], i)
            current = (match.group("name").strip().strip("'\""), i)
    if current is not None:
        spans[current[0]] = (current[1], end)
    return spans


def _rewrite_stage(lines: list[str], span: tuple[int, int], stage: str,
                   files: list[str]) -> list[str]:
    """The lines of ``span`` with the stage's source deps replaced by ``files``."""
    block = lines[span[0]:span[1]]
    at = next((i for i, line in enumerate(block) if _DEPS.match(line)), None)
    if at is None:
        raise RewriteError(f"{stage}: no block-style 'deps:' line to rewrite")
    deps_indent = _indent(block[at])
    end = at + 1
    while end < len(block) and (not block[end].strip() or _indent(block[end]) > deps_indent
                                or (block[end].lstrip().startswith("- ")
                                    and _indent(block[end]) == deps_indent)):
        end += 1
    while end > at + 1 and not block[end - 1].strip():  # trailing blank lines stay outside
        end -= 1
    body = block[at + 1:end]
    items = [line for line in body if line.lstrip().startswith("- ")]
    if not items:
        raise RewriteError(f"{stage}: empty deps list")
    item_indent = _indent(items[0])
    entries: list[tuple[list[str], list[str]]] = []  # (comment lines before, entry lines)
    comments: list[str] = []
    for line in body:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            comments.append(line)
        elif _indent(line) == item_indent and stripped.startswith("- "):
            entries.append((comments, [line]))
            comments = []
        elif entries and _indent(line) > item_indent:
            entries[-1][1].append(line)
        else:
            raise RewriteError(f"{stage}: unexpected line in deps: {line!r}")
    kept: list[str] = []
    for before, entry in entries:
        path = dep_path(yaml.safe_load(entry[0].strip()[2:]) if entry[0].strip()[2:] else "")
        if is_source(path):
            if any(c.strip() for c in before):
                raise RewriteError(f"{stage}: a comment sits among the source deps ({path}); "
                                   "move it above 'deps:'")
            continue
        kept += [*before, *entry]
    kept += comments  # comments after the last entry
    new_body = kept + [f"{' ' * item_indent}- {f}" for f in files]
    return [*block[:at + 1], *new_body, *block[end:]]


def code_stage_block(template: str) -> list[str]:
    """A new code stage for ``template`` (its deps are filled in by the rewrite)."""
    return [f"  {CODE_PREFIX}{template}:",
            f"    cmd: python -m {DIGEST_MODULE} {template}",
            "    deps:",
            f"      - {DIGEST_MODULE.replace('.', '/')}.py",
            "    outs:",
            f"      - {digest_dep(template)}:",
            "          cache: false",
            "          persist: true"]


def with_code_stages(text: str, dvc: dict[str, Any], templates: Iterable[str]) -> str:
    """``text`` with a code stage right after each template that lacks one, and without the
    code stages whose template is gone (every other line unchanged)."""
    stages = dvc.get("stages") or {}
    templates = set(templates)
    lines = text.splitlines()
    spans = _stage_spans(lines)
    edits: list[tuple[int, int, list[str]]] = []
    for name, spec in stages.items():
        template = code_template(name, spec)
        if template is not None and (template not in templates or name != CODE_PREFIX + template):
            edits.append((*spans[name], []))
    for template in templates:
        if CODE_PREFIX + template in stages:
            continue
        start, end = spans[template]
        while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
            end -= 1  # after the template's last line, before the next stage's comments
        edits.append((end, end, ["", *code_stage_block(template)]))
    for start, end, new in sorted(edits, reverse=True):
        lines[start:end] = new
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def rewrite(text: str, root: Path = ROOT, params: dict[str, Any] | None = None) -> str:
    """``text`` (dvc.yaml) with each checked stage's source deps replaced by what its command
    imports; every other line unchanged. A stage with problems (an unknown ``--method``) is a
    :class:`RewriteError`."""
    params = load_params_file(root) if params is None else params
    original = yaml.safe_load(text) or {}
    project = Project(root)
    text = with_code_stages(text, original, template_modules(original, params, project))
    dvc = yaml.safe_load(text) or {}
    results = stage_deps(dvc, params, project)
    broken = [s for s in results if s.problems]
    if broken:
        raise RewriteError("cannot compute the deps of:\n" + report(broken))
    lines = text.splitlines()
    # Bottom-up, so the spans of the stages above stay valid.
    spans = _stage_spans(lines)
    for s in sorted(results, key=lambda s: -spans[s.stage][0] if s.stage in spans else 0):
        if s.stage not in spans:
            raise RewriteError(f"{s.stage}: stage header not found in the text")
        if s.listed == s.expected:
            continue
        start, end = spans[s.stage]
        lines[start:end] = _rewrite_stage(lines, (start, end), s.stage, s.expected)
    out = "\n".join(lines) + ("\n" if text.endswith("\n") else "")
    _same_but_source_deps(original, yaml.safe_load(out) or {})
    return out


def _same_but_source_deps(before: dict[str, Any], after: dict[str, Any]) -> None:
    """The rewritten file loads to the same stages, non-source deps included (in order)."""
    def strip(doc: dict[str, Any]) -> dict[str, Any]:
        out = dict(doc)
        stages = {}
        for name, spec in (doc.get("stages") or {}).items():
            if code_template(name, spec) is not None:
                continue  # code stages are generated
            if params_template(name, spec) is not None:
                stages[name] = spec  # params stages are written by hand: kept as they are
                continue
            spec = dict(spec)
            body = dict(spec.get("do", spec))
            if "deps" in body:
                body["deps"] = [d for d in body["deps"] if not is_source(dep_path(d))]
            if "do" in spec:
                spec["do"] = body
            else:
                spec = body
            stages[name] = spec
        out["stages"] = stages
        return out

    if strip(before) != strip(after):
        raise RewriteError("the rewrite changed more than source deps (not written)")


# --------------------------------------------------------------------------- command line
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.dvc_deps", description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="report missing / extra source deps (default)")
    mode.add_argument("--write", action="store_true", help="rewrite the deps lists of dvc.yaml in place")
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root (default: this one)")
    args = parser.parse_args(argv)
    path = args.root / "dvc.yaml"
    if args.write:
        text = path.read_text(encoding="utf-8")  # read fresh, right before writing
        try:
            new = rewrite(text, args.root)
        except RewriteError as exc:
            print(f"dvc.yaml not written: {exc}", file=sys.stderr)
            return 1
        if path.read_text(encoding="utf-8") != text:
            print("dvc.yaml changed while the deps were computed; run again", file=sys.stderr)
            return 1
        if new != text:
            path.write_text(new, encoding="utf-8")
        bad = check(new, args.root)
        print(f"dvc.yaml: {'deps rewritten' if new != text else 'unchanged'}; "
              f"{'all stages exact' if not bad else 'still wrong:'}")
        if bad:
            print(report(bad))
        return 1 if bad else 0
    bad = check(path.read_text(encoding="utf-8"), args.root)
    if bad:
        print(report(bad))
        print(f"{len(bad)} stage(s) of dvc.yaml whose source deps are not exactly what they "
              "import; fix with: python -m scripts.dvc_deps --write")
        return 1
    print("dvc.yaml: every stage lists exactly the project files it imports")
    return 0


if __name__ == "__main__":
    sys.exit(main())
