"""The entity–passage graph shared by the graph retrievers (re-implementation of HippoRAG 2 §3,
its released graph construction, and PropRAG's proposition graph).

Nodes: entity nodes 0 … E−1 (phrases), then passage nodes E … E+P−1 (corpus order).
Edges, as one symmetric sparse weight matrix W ((E+P) × (E+P), scipy CSR):

* relation edges between the two entities of a fact: R[a, b] = number of (passage, fact)
  occurrences joining a and b (HippoRAG 2: subject–object of a triple; PropRAG: two entities
  of one proposition). The released HippoRAG 2 code counts every occurrence under both keys
  (a, b) and (b, a) and inserts each key as an undirected igraph edge, so a and b end up joined
  by two parallel edges of weight (R + Rᵀ)[a, b] each; W reproduces that effective weight:
  W_rel = 2 (R + Rᵀ) (self-pairs dropped).
* synonymy edges between entity nodes whose embedding cosine is ≥ τ (0.8): S[a, b] = cos(a, b)
  for b among a's ``synonymy_topk`` nearest, at most ``synonymy_max_per_node`` per node, only
  for names with ≥ ``synonymy_min_chars`` alphanumeric characters; stored in both directions
  as the code does: W_syn = S + Sᵀ.
* passage–entity edges ("context" edges): weight 1 between a passage and every entity of its
  facts (M, P × E binary).

Node names are normalised as HippoRAG does (lower case, non-alphanumerics → space), except that
letters outside ASCII are kept (the code's ``[^A-Za-z0-9 ]`` class would turn "Prüm" into
"pr m"). Facts are the distinct normalised (s, p, o) triples, in sorted order (deterministic).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import scipy.sparse as sp

from evichain.retrieval.incidence import binary_csr

if TYPE_CHECKING:
    import pandas as pd

_NON_WORD = re.compile(r"[^\w ]|_")


def normalize_phrase(text: str) -> str:
    """HippoRAG's ``text_processing`` (Unicode letters kept): case-fold, non-alphanumerics →
    space, whitespace collapsed."""
    return " ".join(_NON_WORD.sub(" ", unicodedata.normalize("NFKC", str(text)).casefold()).split())


def fact_text(fact: tuple[str, str, str]) -> str:
    """The text a fact is embedded as: the Python tuple literal, as HippoRAG 2 encodes ``str(fact)``."""
    return str(tuple(fact))


@dataclass(frozen=True)
class FactIndex:
    """Distinct normalised facts; ``subj``/``obj`` are entity indices; ``passages`` (F × P,
    binary) marks the passages that state each fact."""

    facts: list[tuple[str, str, str]]
    subj: np.ndarray
    obj: np.ndarray
    passages: sp.csr_matrix

    @property
    def texts(self) -> list[str]:
        return [fact_text(f) for f in self.facts]

    def entity_incidence(self, n_entities: int) -> sp.csr_matrix:
        """F × E binary: the subject and object entities of every fact."""
        n = len(self.facts)
        rows = np.concatenate([np.arange(n), np.arange(n)])
        return binary_csr(rows, np.concatenate([self.subj, self.obj]), (n, n_entities))


@dataclass(frozen=True)
class Occurrences:
    """Relation pairs and passage–entity mentions before the graph is built."""

    pair_passage: np.ndarray
    pair_a: np.ndarray
    pair_b: np.ndarray
    mention_passage: np.ndarray
    mention_entity: np.ndarray


@dataclass(frozen=True)
class EntityGraph:
    """Entity and passage nodes with the weight matrix W (module docstring)."""

    entity_names: list[str]
    passage_ids: np.ndarray
    W: sp.csr_matrix
    mentions: sp.csr_matrix
    relation: sp.csr_matrix
    synonymy: sp.csr_matrix

    @property
    def n_entities(self) -> int:
        return len(self.entity_names)

    @property
    def n_passages(self) -> int:
        return int(self.passage_ids.shape[0])

    @property
    def n_nodes(self) -> int:
        return self.n_entities + self.n_passages

    @property
    def passages_per_entity(self) -> np.ndarray:
        """|passages containing the entity| (HippoRAG's ``ent_node_to_chunk_ids`` sizes)."""
        return np.asarray(self.mentions.sum(axis=0)).ravel()

    def statistics(self) -> dict[str, Any]:
        """Node and edge counts (Table C.9 shape: undirected edges and stored arcs)."""
        rel = sp.triu(self.relation, k=1).nnz
        syn = sp.triu(self.synonymy, k=1).nnz
        return {"entity_nodes": self.n_entities, "passage_nodes": self.n_passages,
                "relation_edges": int(rel), "synonymy_edges": int(syn),
                "passage_entity_edges": int(self.mentions.nnz), "arcs": int(self.W.nnz),
                "isolated_passages": int((np.asarray(self.mentions.sum(axis=1)).ravel() == 0).sum())}


# --------------------------------------------------------------------------- triples
def triple_facts(triples: pl.DataFrame | pd.DataFrame, passage_ids: Sequence[str]
                 ) -> tuple[list[str], FactIndex, Occurrences]:
    """Entity vocabulary, facts and occurrences from the OpenIE triple table (polars, or pandas
    from the methods' context).

    A triple whose normalised subject or object is empty is dropped; a fact repeated within a
    passage counts once there.
    """
    rank = {p: j for j, p in enumerate(passage_ids)}
    records: dict[tuple[int, str, str, str], None] = {}
    for pid, s, p, o in zip(*(triples[c].to_list() for c in ("passage_id", "subject", "predicate",
                                                              "object"))):
        if pid not in rank:
            raise ValueError(f"triple of passage {pid!r}, which is not in the corpus: re-run "
                             "extract_triples for this corpus")
        ns, np_, no = normalize_phrase(s), normalize_phrase(p), normalize_phrase(o)
        if ns and no:
            records.setdefault((rank[pid], ns, np_, no), None)
    names = sorted({r[1] for r in records} | {r[3] for r in records})
    ent = {n: i for i, n in enumerate(names)}
    facts = sorted({(r[1], r[2], r[3]) for r in records})
    fid = {f: i for i, f in enumerate(facts)}
    rows = np.array([fid[(r[1], r[2], r[3])] for r in records], dtype=np.int64)
    cols = np.array([r[0] for r in records], dtype=np.int64)
    fp = binary_csr(rows, cols, (len(facts), len(passage_ids)))
    index = FactIndex(facts, np.array([ent[f[0]] for f in facts], dtype=np.int64),
                      np.array([ent[f[2]] for f in facts], dtype=np.int64), fp)
    a = np.array([ent[r[1]] for r in records], dtype=np.int64)
    b = np.array([ent[r[3]] for r in records], dtype=np.int64)
    occ = Occurrences(cols, a, b, np.concatenate([cols, cols]), np.concatenate([a, b]))
    return names, index, occ


def proposition_occurrences(owner: np.ndarray, A: sp.csr_matrix) -> Occurrences:
    """PropRAG's relations: every pair of entities of one proposition (A: M × E incidence,
    ``owner[i]`` = passage row of proposition i); mentions = the entities of its propositions."""
    A = A.tocsr()
    pp, pa, pb = [], [], []
    for i in range(A.shape[0]):
        ents = A.indices[A.indptr[i]:A.indptr[i + 1]]
        for x in range(len(ents)):
            for y in range(x + 1, len(ents)):
                pp.append(owner[i])
                pa.append(ents[x])
                pb.append(ents[y])
    coo = A.tocoo()
    return Occurrences(np.asarray(pp, dtype=np.int64), np.asarray(pa, dtype=np.int64),
                       np.asarray(pb, dtype=np.int64), owner[coo.row].astype(np.int64),
                       coo.col.astype(np.int64))


# --------------------------------------------------------------------------- synonymy
def synonymy_matrix(names: Sequence[str], vectors: np.ndarray, threshold: float, topk: int,
                    max_per_node: int, min_chars: int, block: int = 512) -> sp.csr_matrix:
    """Directed S: S[a, b] = cos(a, b) ≥ ``threshold`` for b among a's ``topk`` nearest other
    nodes, best first, at most ``max_per_node``; rows of names with fewer than ``min_chars``
    alphanumeric characters are empty. Blocked dense products (no E × E matrix)."""
    n = len(names)
    eligible = np.array([sum(ch.isalnum() for ch in x) >= min_chars for x in names], dtype=bool)
    V = np.ascontiguousarray(vectors, dtype=np.float32)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    keep = min(topk, max_per_node)
    for start in range(0, n, block):
        sims = V[start:start + block] @ V.T
        for r in range(sims.shape[0]):
            a = start + r
            if not eligible[a]:
                continue
            row = sims[r]
            row[a] = -np.inf
            cand = np.flatnonzero(row >= threshold)
            if cand.size == 0:
                continue
            order = cand[np.lexsort((cand, -row[cand]))][:keep]
            rows.append(np.full(order.size, a))
            cols.append(order)
            vals.append(row[order].astype(np.float64))
    if not rows:
        return sp.csr_matrix((n, n))
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(n, n))


# --------------------------------------------------------------------------- graph
def build_graph(entity_names: Sequence[str], passage_ids: Sequence[str], occ: Occurrences,
                S: sp.csr_matrix) -> EntityGraph:
    """W from relation pairs, mentions and the directed synonymy matrix S (module docstring)."""
    E, P = len(entity_names), len(passage_ids)
    R = sp.csr_matrix((np.ones(occ.pair_a.size), (occ.pair_a, occ.pair_b)), shape=(E, E))
    rel = (2.0 * (R + R.T)).tolil()
    rel.setdiag(0)
    rel = rel.tocsr()
    rel.eliminate_zeros()
    syn = (S + S.T).tocsr()
    M = binary_csr(occ.mention_passage, occ.mention_entity, (P, E))
    W = sp.bmat([[rel + syn, M.T], [M, None]], format="csr")
    W.sum_duplicates()
    W.sort_indices()
    return EntityGraph(list(entity_names), np.asarray(passage_ids, dtype=object), W, M.tocsr(),
                       rel, syn)


def min_max(x: np.ndarray) -> np.ndarray:
    """(x − min) / (max − min); zeros when the range is 0 (the code would divide by zero)."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return x
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)
