"""Stage ``params_<template>``: the ``params.yaml`` values a stage template reads, in one file.

    python -m stages.params_digest <template>                       # pipeline/params/<template>.json
    python -m stages.params_digest <template> --item method=hyde    # pipeline/params/<template>/hyde.json

Why: DVC checks a stage's ``params:`` by parsing ``params.yaml`` again and looking every key
up, once per stage: with ~430 stages and ~4,000 declared keys that was most of ``dvc status``'s
time (``reports/notes/pipeline.md``). The keys a template reads are declared once, on its
``params_<template>`` stage; that stage writes their values here, and every stage of the
template depends on this one small file. A change to one of the keys re-runs
``params_<template>``, its file changes, and DVC re-runs the template's stages, and only them.

Keys that name a matrix item (``graph.${item.method}``) make ``params_<template>`` a matrix
over those item fields only, with one file per value (``pipeline/params/retrieve_graph/
hipporag2.json``): a change to one method's params re-runs that method's stages only.

The file is JSON with sorted keys: ``{"<key>": <value>}`` for each declared key, read from
``params.yaml`` as DVC reads it (YAML 1.2). A declared key missing from ``params.yaml`` is an
error that names it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML

from evichain.io import write_text

PARAMS_DIR = Path("pipeline/params")
"""Where the params files live (committed: a fresh clone's ``dvc status`` compares them)."""
STAGE_PREFIX = "params_"
_ITEM = re.compile(r"\$\{item\.(\w+)\}")


def params_path(template: str, item: dict[str, str] | None = None) -> Path:
    """``pipeline/params/<template>.json``, or ``pipeline/params/<template>/<values>.json`` for
    a matrix item (its values in the order given, joined by ``-``)."""
    if not item:
        return PARAMS_DIR / f"{template}.json"
    return PARAMS_DIR / template / ("-".join(item.values()) + ".json")


def declared_keys(template: str, stages: dict[str, Any], item: dict[str, str]) -> list[str]:
    """The ``params.yaml`` keys ``params_<template>`` declares, ``${item.<field>}`` filled in."""
    name = STAGE_PREFIX + template
    if name not in stages:
        raise SystemExit(f"dvc.yaml: no stage {name!r}")
    keys = [k for k in stages[name].get("params") or [] if isinstance(k, str)]
    missing = sorted({f for k in keys for f in _ITEM.findall(k)} - set(item))
    if missing:
        raise SystemExit(f"{name}: pass --item {missing[0]}=<value> (its params name ${{item.{missing[0]}}})")
    return [_ITEM.sub(lambda m: item[m.group(1)], k) for k in keys]


def lookup(params: dict[str, Any], key: str) -> Any:
    """``params[a][b]...`` for ``key`` ``"a.b..."``; a missing key is an error naming it."""
    value: Any = params
    for i, part in enumerate(key.split(".")):
        if not isinstance(value, dict) or part not in value:
            raise SystemExit(f"params.yaml: no key {'.'.join(key.split('.')[:i + 1])!r} "
                             f"(declared by a params_ stage of dvc.yaml as {key!r})")
        value = value[part]
    return value


def load_params(path: Path = Path("params.yaml")) -> dict[str, Any]:
    """``params.yaml`` as DVC reads it: YAML 1.2 (``1e-10`` is a float), plain Python types."""
    data = YAML(typ="safe", pure=False).load(path.read_text(encoding="utf-8"))
    return data or {}


def values_json(keys: list[str], params: dict[str, Any]) -> str:
    """``{"<key>": <value>}`` for ``keys``, sorted, indented, with a trailing newline."""
    return json.dumps({k: lookup(params, k) for k in keys}, indent=1, sort_keys=True,
                      ensure_ascii=False) + "\n"


def _item(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        field, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--item {pair!r}: expected <field>=<value>")
        out[field] = value
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.params_digest",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("template", help="the stage template whose params to write")
    parser.add_argument("--item", action="append", default=[], metavar="FIELD=VALUE",
                        help="a matrix item field its keys name (repeatable)")
    args = parser.parse_args(argv)
    item = _item(args.item)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    stages = (yaml.load(Path("dvc.yaml").read_text(encoding="utf-8"), Loader=loader) or {}).get("stages") or {}
    keys = declared_keys(args.template, stages, item)
    out = params_path(args.template, item)
    text = values_json(keys, load_params())
    if not out.exists() or out.read_text(encoding="utf-8") != text:
        write_text(text, out)
    print(f"{out}: {len(keys)} params")
    return 0


if __name__ == "__main__":
    sys.exit(main())
