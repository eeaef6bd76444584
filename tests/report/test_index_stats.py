"""Index statistics committed under reports/index_stats/ and shown in the shape of EviReform
Tables C.8 (PropRAG), C.9 (HippoRAG 2 / CatRAG shared graph) and C.10 (EviReform)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evichain.report import index_stats as ix

EVIREFORM = {"dataset": "2wiki_s", "passages": 6119, "propositions": 21337, "entities": 35524,
             "incidence_nonzeros": 72232, "propositions_per_passage": 3.487,
             "entities_per_proposition": 3.385, "propositions_without_shared_entity": 548,
             "extractor": {"sentences": 21337}, "entity_degree": {"max": 204}}
GRAPH = {"arcs": 366, "entity_nodes": 101, "facts": 83, "isolated_passages": 0,
         "passage_entity_edges": 102, "passage_nodes": 14, "relation_edges": 74, "synonymy_edges": 8}


def _artifacts(root: Path) -> Path:
    """An ``artifacts/<ds>`` folder with the EviReform stats and two graph usage summaries."""
    ds = root / "2wiki_s"
    (ds / "index").mkdir(parents=True)
    (ds / "usage").mkdir()
    (ds / "index" / "evireform_stats.json").write_text(json.dumps(EVIREFORM))
    (ds / "usage" / "retrieve-hipporag2.json").write_text(json.dumps({"questions": 100, "index": GRAPH}))
    proprag = {k: v for k, v in GRAPH.items() if k != "facts"} | {"propositions": 21337}
    (ds / "usage" / "retrieve-proprag.json").write_text(json.dumps({"questions": 100, "index": proprag}))
    return ds


def test_export_copies_every_built_index_and_reads_back(tmp_path: Path) -> None:
    out = tmp_path / "reports" / "index_stats"
    written = ix.export_from_artifacts(_artifacts(tmp_path / "artifacts"), out, "2wiki_s")
    assert [p.name for p in written] == ["evireform.json", "proprag.json", "hipporag2.json"]
    stats = ix.read_index_stats(out, ["2wiki_s", "musique"])
    assert list(stats) == ["2wiki_s"]  # musique: no index built
    assert stats["2wiki_s"]["evireform"] == EVIREFORM
    assert stats["2wiki_s"]["hipporag2"] == {"dataset": "2wiki_s", "method": "hipporag2", **GRAPH}
    # the same bytes as the stage's own write_json of the same record
    assert (out / "2wiki_s" / "evireform.json").read_text() == (
        json.dumps(EVIREFORM, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def test_a_graph_summary_without_index_block_and_unknown_files_are_errors(tmp_path: Path) -> None:
    ds = _artifacts(tmp_path)
    (ds / "usage" / "retrieve-catrag.json").write_text(json.dumps({"questions": 100}))
    with pytest.raises(ValueError, match="retrieve-catrag.json has no 'index' block"):
        ix.export_from_artifacts(ds, tmp_path / "out", "2wiki_s")
    (tmp_path / "stats" / "demo").mkdir(parents=True)
    (tmp_path / "stats" / "demo" / "bm25.json").write_text("{}")
    with pytest.raises(ValueError, match="unknown index statistics"):
        ix.read_index_stats(tmp_path / "stats", ["demo"])
    with pytest.raises(ValueError, match="unknown index 'bm25'"):
        ix.stats_path(tmp_path, "demo", "bm25")


def test_tables_have_the_shape_of_c8_to_c10() -> None:
    mixed = EVIREFORM | {"dataset": "demo", "extractor": {"llm": 45, "sentences": 5}}
    stats = {"2wiki_s": {"evireform": EVIREFORM, "proprag": GRAPH | {"propositions": 21337}},
             "demo": {"evireform": mixed, "hipporag2": GRAPH, "catrag": GRAPH}}
    c10 = ix.evireform_table(stats)
    assert c10.columns == ["Dataset", "Extractor", *ix.EVIREFORM_COLUMNS.values()]
    assert c10.row(0) == ("2wiki_s", "sentences", 6119, 21337, 35524, 72232, 3.487, 3.385, 548)
    assert c10["Extractor"].to_list()[1] == "llm 90%, sentences 10%"
    c8 = ix.proprag_table(stats)
    assert c8["Dataset"].to_list() == ["2wiki_s"] and c8["Propositions"].to_list() == [21337]
    c9 = ix.shared_graph_table(stats)
    assert c9.select("Dataset", "Method").rows() == [("demo", "hipporag2"), ("demo", "catrag")]
    assert c9["Stored arcs"].to_list() == [366, 366]
    md = ix.index_stats_section(stats)
    headings = [md.index(f"### Table C.{i} shape") for i in (8, 9, 10)]
    assert headings == sorted(headings)
    assert "| 2wiki_s | sentences | 6119 | 21337 | 35524 | 72232 | 3.487 | 3.385 | 548 |" in md
    only = ix.index_stats_section({"musique": {"evireform": EVIREFORM}})
    assert "Table C.10" in only and "Table C.8" not in only
    assert ix.index_stats_section({}) == ""
