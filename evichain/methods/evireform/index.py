"""The EviReform proposition–entity index (paper §3.4) and its statistics (Table C.10).

Structures: proposition embeddings H (M × d, L2-normalised rows h_i), the binary incidence
A (M × N_e, scipy CSR), the ownership map π (``owner[i]`` = row of d_π(i) in the corpus)
and |P_j| (propositions per passage). Propositions are ordered by stored passage order, then
by ordinal, so every index built from the same tables is identical.

Tables come as polars, or as pandas from the methods' context and the stage that still read
theirs with pandas; :func:`build_index` reads their columns as lists, the statistics convert
the columns they need to polars once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import scipy.sparse as sp

from evichain.methods.evireform.propagation import EntityPropagator
from evichain.retrieval.incidence import incidence_matrix, order_propositions

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DEGREE_BUCKETS", "EviReformIndex", "build_index", "incidence_matrix", "index_statistics",
           "order_propositions", "statistics_markdown"]

DEGREE_BUCKETS: tuple[tuple[int, int], ...] = ((1, 1), (2, 4), (5, 9), (10, 99), (100, 999),
                                               (1000, 10**12))


@dataclass(frozen=True)
class EviReformIndex:
    """Everything online retrieval needs (Steps 1–7)."""

    passage_ids: np.ndarray
    passage_texts: list[str]
    prop_ids: np.ndarray
    prop_texts: list[str]
    owner: np.ndarray
    n_props: np.ndarray
    H: np.ndarray
    A: sp.csr_matrix
    entity_ids: np.ndarray
    propagator: EntityPropagator

    @property
    def n_passages(self) -> int:
        return int(self.passage_ids.shape[0])

    @property
    def n_propositions(self) -> int:
        return int(self.prop_ids.shape[0])


def build_index(corpus: pl.DataFrame | pd.DataFrame, props: pl.DataFrame | pd.DataFrame,
                entities: pl.DataFrame | pd.DataFrame, incidence: pl.DataFrame | pd.DataFrame,
                H: np.ndarray, passage_format: str) -> EviReformIndex:
    """Assemble H, A, π, |P_j| (``props`` and ``H`` must already be in the same order):
    ``owner[i]`` = corpus row of proposition i's passage, ``n_props[j]`` = propositions of
    passage j, passage texts = ``passage_format`` filled with each row's title and text."""
    passage_ids = corpus["passage_id"].to_list()
    if H.shape[0] != len(props):
        raise ValueError(f"{H.shape[0]} embeddings for {len(props)} propositions")
    owner = _owner_rows(props["passage_id"].to_list(), passage_ids)
    entity_ids = entities["entity_id"].to_list()
    prop_ids = props["prop_id"].to_list()
    A = incidence_matrix(prop_ids, entity_ids, incidence)
    texts = [passage_format.format(title=t, text=x)
             for t, x in zip(corpus["title"].to_list(), corpus["text"].to_list())]
    return EviReformIndex(
        passage_ids=np.asarray(passage_ids, dtype=object), passage_texts=texts,
        prop_ids=np.asarray(prop_ids, dtype=object), prop_texts=props["text"].to_list(),
        owner=owner, n_props=np.bincount(owner, minlength=len(passage_ids)),
        H=np.ascontiguousarray(H, dtype=np.float32), A=A,
        entity_ids=np.asarray(entity_ids, dtype=object),
        propagator=EntityPropagator.from_incidence(A))


def _owner_rows(prop_passages: Sequence[str], passage_ids: Sequence[str]) -> np.ndarray:
    """π: the corpus row of each proposition's passage (int64); a passage not in the corpus is
    a ValueError."""
    rank = {pid: i for i, pid in enumerate(passage_ids)}
    missing = sorted({p for p in prop_passages if p not in rank})
    if missing:
        raise ValueError(f"propositions of passages not in the corpus, e.g. {missing[:3]}")
    return np.fromiter((rank[p] for p in prop_passages), dtype=np.int64, count=len(prop_passages))


# --------------------------------------------------------------------------- statistics
def _columns(table: pl.DataFrame | pd.DataFrame, columns: Sequence[str]) -> pl.DataFrame:
    """``columns`` of ``table`` as polars (a pandas table cut to them, then converted once)."""
    if isinstance(table, pl.DataFrame):
        return table.select(columns)
    return pl.from_pandas(table[list(columns)])


def _counts_per(keys: pl.DataFrame, key: str, of: pl.Series) -> np.ndarray:
    """Rows of ``keys`` per value of ``of`` (in ``of``'s order; 0 where a value has none)."""
    counts = dict(keys.group_by(key).len().iter_rows())
    return np.array([counts.get(v, 0) for v in of.to_list()], dtype=np.int64)


def index_statistics(corpus: pl.DataFrame | pd.DataFrame, props: pl.DataFrame | pd.DataFrame,
                     entities: pl.DataFrame | pd.DataFrame, incidence: pl.DataFrame | pd.DataFrame,
                     status: pl.DataFrame | pd.DataFrame | None = None) -> dict[str, Any]:
    """Table C.10 (passages, propositions, entities, incidence non-zeros, propositions per
    passage) plus the entity degree distribution that D_e⁺ normalises (DESIGN §4).

    Means are over every passage / proposition (those with none count 0); an entity's degree
    is its number of incidence rows; propositions without a shared entity are the rows of A
    whose propagation row sum is 0."""
    corpus_ids = _columns(corpus, ["passage_id"])["passage_id"]
    props = _columns(props, ["prop_id", "passage_id", "extractor"])
    entities = _columns(entities, ["entity_id", "name", "is_title", "degree"])
    incidence = _columns(incidence, ["prop_id", "entity_id"])
    per_passage = _counts_per(props, "passage_id", corpus_ids)
    ents_per_prop = _counts_per(incidence, "prop_id", props["prop_id"])
    degree = incidence.group_by("entity_id").len()["len"].to_numpy()
    A = incidence_matrix(props["prop_id"].to_list(), entities["entity_id"].to_list(), incidence)
    isolated = int((EntityPropagator.from_incidence(A).row_sums == 0).sum())
    stats: dict[str, Any] = {
        "passages": corpus_ids.len(),
        "propositions": props.height,
        "entities": entities.height,
        "incidence_nonzeros": incidence.height,
        "propositions_per_passage": round(float(per_passage.mean()), 3),
        "passages_without_propositions": int((per_passage == 0).sum()),
        "entities_per_proposition": round(float(ents_per_prop.mean()), 3),
        "propositions_without_shared_entity": isolated,
        "title_entities": int(entities["is_title"].sum()),
        "extractor": _extractor_counts(props),
        "entity_degree": _degree_summary(degree),
    }
    if status is not None:
        stats["extraction_failed"] = int((_columns(status, ["status"])["status"] == "failed").sum())
    stats["top_entities"] = _top_entities(entities, 10)
    return stats


def _extractor_counts(props: pl.DataFrame) -> dict[str, int]:
    """Propositions per extractor, extractors sorted by name."""
    counts = props.drop_nulls("extractor").group_by("extractor").len().sort("extractor")
    return {str(k): int(v) for k, v in counts.iter_rows()}


def _degree_summary(degree: np.ndarray) -> dict[str, Any]:
    """Mean, p50/p90/p99 (numpy's linear percentiles), max and the :data:`DEGREE_BUCKETS`
    counts of the entity degrees."""
    d = np.asarray(degree)
    if d.size == 0:
        return {"max": 0, "buckets": {}}
    q = np.percentile(d, [50, 90, 99])
    buckets = {(f"{lo}" if lo == hi else f"{lo}+" if hi > 10**9 else f"{lo}-{hi}"):
               int(((d >= lo) & (d <= hi)).sum()) for lo, hi in DEGREE_BUCKETS}
    return {"mean": round(float(d.mean()), 3), "p50": float(q[0]), "p90": float(q[1]),
            "p99": float(q[2]), "max": int(d.max()), "buckets": buckets}


def _top_entities(entities: pl.DataFrame, n: int) -> list[dict[str, Any]]:
    """The ``n`` entities of highest degree (ties: smaller entity_id first)."""
    top = entities.sort(["degree", "entity_id"], descending=[True, False], maintain_order=True).head(n)
    return [{"name": name, "degree": int(deg)} for name, deg in top.select("name", "degree").iter_rows()]


def statistics_markdown(dataset: str, stats: dict[str, Any]) -> str:
    """Table C.10 row and the degree distribution, as Markdown."""
    ex = ", ".join(f"{k}: {v}" for k, v in stats["extractor"].items())
    deg = stats["entity_degree"]
    lines = [
        f"# EviReform index statistics: {dataset}", "",
        f"Extractor (propositions per extractor): {ex}", "",
        "| Dataset | Passages | Propositions | Entities | Incidence non-zeros | Propositions/passage |",
        "|---|---:|---:|---:|---:|---:|",
        f"| {dataset} | {stats['passages']:,} | {stats['propositions']:,} | {stats['entities']:,} "
        f"| {stats['incidence_nonzeros']:,} | {stats['propositions_per_passage']:.2f} |", "",
        "Incidence non-zeros count proposition–entity memberships (as Table C.10).", "",
        "## Entity degree distribution (propositions per entity)", "",
        f"mean {deg.get('mean', 0)}, median {deg.get('p50', 0)}, p90 {deg.get('p90', 0)}, "
        f"p99 {deg.get('p99', 0)}, max {deg['max']}", "",
        "| degree | entities |", "|---|---:|",
        *[f"| {k} | {v:,} |" for k, v in deg["buckets"].items()], "",
        "| most frequent entity | degree |", "|---|---:|",
        *[f"| {e['name']} | {e['degree']:,} |" for e in stats["top_entities"]], "",
        f"Propositions without a shared entity (no propagated mass): "
        f"{stats['propositions_without_shared_entity']:,}; passages without propositions: "
        f"{stats['passages_without_propositions']:,}.",
    ]
    return "\n".join(lines) + "\n"
