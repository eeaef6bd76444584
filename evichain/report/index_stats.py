"""Index statistics of the structural indexes, committed under ``reports/index_stats/`` and shown
in the shape of EviReform Tables C.8-C.10 (§C.8 "Graph and Index Contents").

One JSON per dataset and index, ``reports/index_stats/<dataset>/<index>.json``:

* ``evireform.json`` (Table C.10): the ``canonicalize_entities`` stage's statistics
  (``artifacts/<ds>/index/evireform_stats.json``: passages, propositions, entities, incidence
  non-zeros = proposition–entity memberships, propositions per passage, entities per proposition,
  the extractor and the entity degree distribution);
* ``proprag.json`` (Table C.8) and ``hipporag2.json`` / ``catrag.json`` (Table C.9, the shared
  HippoRAG 2 / CatRAG entity–passage graph): the ``index`` block of the graph retrieval stage's
  usage summary (``artifacts/<ds>/usage/retrieve-<method>.json``: node, edge and stored-arc counts
  of :meth:`evichain.methods.graph.graph.Graph.statistics`).

GeAR here walks the EviReform proposition–entity index (Table C.10), not the HippoRAG 2 graph
of the paper's Table C.9 (the departure of :mod:`evichain.methods.iterative.gear`).
:func:`export_from_artifacts` copies the stage outputs of one dataset into ``reports/``;
:func:`read_index_stats` and :func:`index_stats_section` make the report's tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from evichain.io import read_json, write_json
from evichain.report.tables import render_plain_markdown

Stats = Mapping[str, Mapping[str, Mapping[str, Any]]]  # dataset → index → statistics

GRAPH_INDEXES: tuple[str, ...] = ("proprag", "hipporag2", "catrag")
"""Graph methods whose retrieval summary carries their index statistics."""

INDEXES: tuple[str, ...] = ("evireform", *GRAPH_INDEXES)

EVIREFORM_COLUMNS: dict[str, str] = {
    "passages": "Passages", "propositions": "Propositions", "entities": "Entities",
    "incidence_nonzeros": "Incidence non-zeros", "propositions_per_passage": "Propositions / passage",
    "entities_per_proposition": "Entities / proposition",
    "propositions_without_shared_entity": "Propositions without a shared entity"}
"""Table C.10's columns: statistics key → header."""

PROPRAG_COLUMNS: dict[str, str] = {
    "passage_nodes": "Passage nodes", "propositions": "Propositions", "entity_nodes": "Entity nodes",
    "passage_entity_edges": "Passage–entity edges", "relation_edges": "Relation edges",
    "synonymy_edges": "Synonymy edges", "arcs": "Stored arcs", "isolated_passages": "Isolated passages"}
"""Table C.8's columns."""

SHARED_GRAPH_COLUMNS: dict[str, str] = {
    "facts": "Facts", "entity_nodes": "Entity nodes", "passage_nodes": "Passage nodes",
    "passage_entity_edges": "Passage–entity edges", "relation_edges": "Relation edges",
    "synonymy_edges": "Synonymy edges", "arcs": "Stored arcs", "isolated_passages": "Isolated passages"}
"""Table C.9's columns."""


def stats_path(root: Path, dataset: str, index: str) -> Path:
    """``<root>/<dataset>/<index>.json`` (``root``: ``reports/index_stats``)."""
    if index not in INDEXES:
        raise ValueError(f"unknown index {index!r}: expected one of {INDEXES}")
    return root / dataset / f"{index}.json"


def write_index_stats(stats: Mapping[str, Any], root: Path, dataset: str, index: str) -> Path:
    """Write one index's statistics (sorted keys, as :func:`evichain.io.write_json`)."""
    return write_json(dict(stats), stats_path(root, dataset, index))


def artifact_sources(dataset_dir: Path) -> dict[str, Path]:
    """index → the stage output holding its statistics in ``artifacts/<ds>`` (``dataset_dir``)."""
    return {"evireform": dataset_dir / "index" / "evireform_stats.json",
            **{m: dataset_dir / "usage" / f"retrieve-{m}.json" for m in GRAPH_INDEXES}}


def export_from_artifacts(dataset_dir: Path, root: Path, dataset: str) -> list[Path]:
    """Copy the statistics of every index built for ``dataset`` (those of
    :func:`artifact_sources` that exist) to ``<root>/<dataset>/<index>.json``; a graph summary
    without an ``index`` block is a ``ValueError``. Returns the files written."""
    written = []
    for index, source in artifact_sources(dataset_dir).items():
        if not source.exists():
            continue
        data = read_json(source)
        if index != "evireform":
            if "index" not in data:
                raise ValueError(f"{source} has no 'index' block: re-run its retrieval stage")
            data = {"dataset": dataset, "method": index, **data["index"]}
        written.append(write_index_stats(data, root, dataset, index))
    return written


def read_index_stats(root: Path, datasets: Sequence[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """dataset → index → statistics from ``<root>/<dataset>/<index>.json`` (datasets without a
    folder left out); a file whose name is not in :data:`INDEXES` is a ``ValueError``."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for ds in datasets:
        folder = root / ds
        if not folder.is_dir():
            continue
        files = sorted(folder.glob("*.json"))
        unknown = [f.name for f in files if f.stem not in INDEXES]
        if unknown:
            raise ValueError(f"{folder}: unknown index statistics {unknown} (expected {INDEXES})")
        if files:
            out[ds] = {f.stem: read_json(f) for f in files}
    return out


def _extractor(stats: Mapping[str, Any]) -> str:
    """``sentences`` / ``llm`` or ``llm 90%, sentences 10%`` (share of propositions)."""
    counts = stats.get("extractor") or {}
    total = sum(counts.values())
    if len(counts) <= 1:
        return next(iter(counts), "")
    return ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def _table(rows: Sequence[Mapping[str, Any]], columns: Mapping[str, str],
           lead: Mapping[str, Sequence[str]]) -> pl.DataFrame:
    """One row per statistics record: the ``lead`` text columns, then ``columns`` (null where a
    record lacks the key)."""
    data: dict[str, list[Any]] = {**{k: list(v) for k, v in lead.items()}}
    for key, header in columns.items():
        data[header] = [r.get(key) for r in rows]
    return pl.DataFrame(data, strict=False)


def evireform_table(stats: Stats) -> pl.DataFrame:
    """Table C.10 shape: one row per dataset with EviReform index statistics."""
    rows = [(ds, found["evireform"]) for ds, found in stats.items() if "evireform" in found]
    return _table([r for _, r in rows], EVIREFORM_COLUMNS,
                  {"Dataset": [ds for ds, _ in rows], "Extractor": [_extractor(r) for _, r in rows]})


def proprag_table(stats: Stats) -> pl.DataFrame:
    """Table C.8 shape: one row per dataset with PropRAG index statistics."""
    rows = [(ds, found["proprag"]) for ds, found in stats.items() if "proprag" in found]
    return _table([r for _, r in rows], PROPRAG_COLUMNS, {"Dataset": [ds for ds, _ in rows]})


def shared_graph_table(stats: Stats) -> pl.DataFrame:
    """Table C.9 shape: one row per dataset and method of the HippoRAG 2 / CatRAG graph."""
    rows = [(ds, m, found[m]) for ds, found in stats.items() for m in ("hipporag2", "catrag") if m in found]
    return _table([r for _, _, r in rows], SHARED_GRAPH_COLUMNS,
                  {"Dataset": [ds for ds, _, _ in rows], "Method": [m for _, m, _ in rows]})


def index_stats_section(stats: Stats, heading: str = "##") -> str:
    """Markdown: the three tables (those with rows) under ``<heading> Index statistics``, each
    with what it counts; '' when no dataset has statistics."""
    tables = [
        ("Table C.8 shape: PropRAG index", proprag_table(stats),
         "Stored arcs count every directed record of its undirected graph."),
        ("Table C.9 shape: HippoRAG 2 / CatRAG shared index", shared_graph_table(stats),
         "Both methods build the same entity–passage graph from the OpenIE triples; arcs count "
         "stored directed arcs. GeAR here walks the EviReform index below (our departure)."),
        ("Table C.10 shape: EviReform index", evireform_table(stats),
         "Incidence non-zeros count proposition–entity memberships; extractor `sentences` = the "
         "LLM-free one-proposition-per-sentence index (not the paper's LLM extraction)."),
    ]
    parts = [f"{heading} Index statistics (EviReform Tables C.8–C.10 shape)", "",
             "From `reports/index_stats/<dataset>/<index>.json`, written from the index and "
             "graph-retrieval stages' outputs; a dataset whose index was not built has no row."]
    shown = [(title, table, note) for title, table, note in tables if table.height]
    if not shown:
        return ""
    for title, table, note in shown:
        parts += ["", f"{heading}# {title}", "", render_plain_markdown(table), "", note]
    return "\n".join(parts) + "\n"
