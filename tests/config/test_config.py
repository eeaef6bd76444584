"""params.yaml validation: defaults load; bad keys and values are named in the error."""

from __future__ import annotations

from pathlib import Path

import pytest

from evichain.config import ParamsError, load_params, parse_params

ROOT = Path(__file__).resolve().parents[2]


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


# --------------------------------------------------------------------------- method blocks
def _imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports (module level and inside functions)."""
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_config_imports_nothing_of_the_methods() -> None:
    """Method blocks are reached by name (the catalogue), so a stage's import closure holds only
    the params modules it imports itself."""
    imported = _imports_of(ROOT / "evichain" / "config.py")
    assert not [m for m in imported if m.startswith("evichain.methods")], imported


def test_method_blocks_read_as_attributes_and_blocks() -> None:
    params = load_params(ROOT / "params.yaml")
    assert params.evireform is params.block("evireform")
    assert params.graph.catrag is params.block("graph.catrag")
    assert params.rerank.pool_size >= 1 and params.cee.k_cand >= 1
    with pytest.raises(AttributeError, match="nope"):
        params.nope  # noqa: B018
    with pytest.raises(KeyError, match="no params block 'nope'"):
        params.block("nope")


def test_absent_method_block_has_its_defaults() -> None:
    from evichain.methods.rerank.params import RerankParams

    assert parse_params({}).rerank == RerankParams()


def test_bad_value_in_a_method_block_is_named() -> None:
    with pytest.raises(ParamsError, match=r"params\.yaml: rerank\.pool_size: .*greater than or equal to 1"):
        parse_params({"rerank": {"pool_size": 0}}, source="params.yaml")
    with pytest.raises(ParamsError, match=r"unknown key 'graph\.catrag\.zz'"):
        parse_params({"graph": {"catrag": {"zz": 1}}}, source="params.yaml")
    with pytest.raises(ParamsError, match=r"unknown key 'rerankk'"):
        parse_params({"rerankk": {}}, source="params.yaml")


def test_errors_of_core_sections_and_method_blocks_come_together() -> None:
    with pytest.raises(ParamsError) as err:
        parse_params({"retrieval": {"bm25": {"b": 3}}, "cee": {"k_cand": 0}}, source="p.yaml")
    assert "retrieval.bm25.b" in str(err.value) and "cee.k_cand" in str(err.value)


def test_variant_lists_are_checked_by_their_methods() -> None:
    with pytest.raises(ParamsError, match=r"evireform_variants: .*unknown EviReform variant\(s\) \['ful'\]"):
        parse_params({"evireform_variants": ["ful"]})
    with pytest.raises(ParamsError, match=r"cee_variants: .*unknown CEE variant\(s\) \['x'\]"):
        parse_params({"cee_variants": ["x"]})
    assert parse_params({"evireform_variants": ["robust"], "cee_variants": ["robust"]})


def test_dump_and_equality_include_method_blocks() -> None:
    a = parse_params({"rerank": {"pool_size": 7}})
    dump = a.model_dump()
    assert dump["rerank"]["pool_size"] == 7
    assert {"evireform", "cee", "rerank", "expansion", "iterative", "graph"} <= set(dump)
    assert set(a.model_dump(exclude_unset=True)) & {"evireform", "rerank"} == {"rerank"}
    assert a == parse_params({"rerank": {"pool_size": 7}}) != parse_params({})
    assert parse_params(dump) == a  # a dump loads back
    b = a.model_copy(update={"rerank": a.rerank.model_copy(update={"pool_size": 9})})
    assert b.rerank.pool_size == 9 and a.rerank.pool_size == 7 and b != a


def test_every_catalogue_block_registers_itself() -> None:
    import importlib

    from evichain.methods.catalogue import BLOCK_MODULES
    from evichain.params_base import registered_blocks

    for key, module in BLOCK_MODULES.items():
        importlib.import_module(module)
        assert registered_blocks()[key].__module__ == module, key
