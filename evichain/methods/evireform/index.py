"""The EviReform proposition–entity index (paper §3.4) and its statistics (Table C.10).

Structures: proposition embeddings H (M × d, L2-normalised rows h_i), the binary incidence
A (M × N_e, scipy CSR), the ownership map π (``owner[i]`` = row of d_π(i) in the corpus)
and |P_j| (propositions per passage). Propositions are ordered by stored passage order, then
by ordinal, so every index built from the same tables is identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from evichain.methods.evireform.propagation import EntityPropagator
from evichain.retrieval.incidence import incidence_matrix, order_propositions

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


def build_index(corpus: pd.DataFrame, props: pd.DataFrame, entities: pd.DataFrame,
                incidence: pd.DataFrame, H: np.ndarray, passage_format: str) -> EviReformIndex:
    """Assemble H, A, π, |P_j| (``props`` and ``H`` must already be in the same order)."""
    passage_ids = corpus["passage_id"].tolist()
    if H.shape[0] != len(props):
        raise ValueError(f"{H.shape[0]} embeddings for {len(props)} propositions")
    rank = {pid: i for i, pid in enumerate(passage_ids)}
    owner = props["passage_id"].map(rank).to_numpy(np.int64)
    entity_ids = entities["entity_id"].tolist()
    A = incidence_matrix(props["prop_id"].tolist(), entity_ids, incidence)
    texts = [passage_format.format(title=t, text=x) for t, x in zip(corpus["title"], corpus["text"])]
    return EviReformIndex(
        passage_ids=np.asarray(passage_ids, dtype=object), passage_texts=texts,
        prop_ids=props["prop_id"].to_numpy(object), prop_texts=props["text"].tolist(),
        owner=owner, n_props=np.bincount(owner, minlength=len(passage_ids)),
        H=np.ascontiguousarray(H, dtype=np.float32), A=A,
        entity_ids=np.asarray(entity_ids, dtype=object),
        propagator=EntityPropagator.from_incidence(A))


# --------------------------------------------------------------------------- statistics
def index_statistics(corpus: pd.DataFrame, props: pd.DataFrame, entities: pd.DataFrame,
                     incidence: pd.DataFrame, status: pd.DataFrame | None = None) -> dict[str, Any]:
    """Table C.10 (passages, propositions, entities, incidence non-zeros, propositions per
    passage) plus the entity degree distribution that D_e⁺ normalises (DESIGN §4)."""
    per_passage = props.groupby("passage_id").size().reindex(corpus["passage_id"], fill_value=0)
    degree = incidence.groupby("entity_id").size()
    ents_per_prop = incidence.groupby("prop_id").size().reindex(props["prop_id"], fill_value=0)
    A = incidence_matrix(props["prop_id"].tolist(), entities["entity_id"].tolist(), incidence)
    isolated = int((EntityPropagator.from_incidence(A).row_sums == 0).sum())
    stats: dict[str, Any] = {
        "passages": int(len(corpus)),
        "propositions": int(len(props)),
        "entities": int(len(entities)),
        "incidence_nonzeros": int(len(incidence)),
        "propositions_per_passage": round(float(per_passage.mean()), 3),
        "passages_without_propositions": int((per_passage == 0).sum()),
        "entities_per_proposition": round(float(ents_per_prop.mean()), 3),
        "propositions_without_shared_entity": isolated,
        "title_entities": int(entities["is_title"].sum()),
        "extractor": _extractor_counts(props),
        "entity_degree": _degree_summary(degree),
    }
    if status is not None:
        stats["extraction_failed"] = int((status["status"] == "failed").sum())
    stats["top_entities"] = _top_entities(entities, 10)
    return stats


def _extractor_counts(props: pd.DataFrame) -> dict[str, int]:
    return {str(k): int(v) for k, v in props["extractor"].value_counts().sort_index().items()}


def _degree_summary(degree: pd.Series) -> dict[str, Any]:
    d = degree.to_numpy()
    if d.size == 0:
        return {"max": 0, "buckets": {}}
    q = np.percentile(d, [50, 90, 99])
    buckets = {(f"{lo}" if lo == hi else f"{lo}+" if hi > 10**9 else f"{lo}-{hi}"):
               int(((d >= lo) & (d <= hi)).sum()) for lo, hi in DEGREE_BUCKETS}
    return {"mean": round(float(d.mean()), 3), "p50": float(q[0]), "p90": float(q[1]),
            "p99": float(q[2]), "max": int(d.max()), "buckets": buckets}


def _top_entities(entities: pd.DataFrame, n: int) -> list[dict[str, Any]]:
    top = entities.sort_values(["degree", "entity_id"], ascending=[False, True]).head(n)
    return [{"name": r.name, "degree": int(r.degree)} for r in top.itertuples()]


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
