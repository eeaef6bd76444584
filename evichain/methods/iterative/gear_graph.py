"""The graph GeAR expands over, built from the EviReform proposition–entity index.

GeAR (Shen et al. 2025, §3 "SyncGE") links the proximal triples that the LLM read from the
retrieved passages to triples of a corpus-wide triple graph, expands them by a diverse beam
search over connected triples, and returns the passages the paths reach. The EviReform paper
runs GeAR on the entity–passage graph it shares with HippoRAG 2 (Appendix C.6). That graph is
not built here; the nearest real structure is the EviReform index that exists for each dataset
(``index/propositions.parquet``, ``entities.parquet``, ``incidence.parquet``): propositions play
the role of index triples and two propositions are connected when they share a canonical
entity, so passages are linked through shared canonical entities.

* Linking: a proximal triple "s r o" is linked to its ``link_k`` nearest propositions by
  cosine similarity (positive only) — GeAR links to the nearest index triples.
* Beam search: a path is a sequence of propositions in distinct passages, consecutive ones
  sharing an entity; its score is the mean of u_i = max(0, h_iᵀh_ρ) over its propositions
  (relevance to the current query ρ). Each hop extends every beam path to every proposition
  sharing an entity with its last one, then keeps the ``beam_size`` best paths with distinct end
  passages (our diversity rule). Hop 0 is the linked propositions themselves.
* A passage reached by a path end scores the best such path; the expansion returns these
  passages best first (ties by stored passage order).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
import scipy.sparse as sp

from evichain.retrieval.incidence import Table, incidence_matrix, order_propositions
from evichain.retrieval.run import top_k_indices

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Path:
    """A beam path: summed step scores, its propositions' passages, and its last proposition."""

    total: float
    passages: tuple[int, ...]
    last: int

    @property
    def score(self) -> float:
        """Mean u over the path's propositions."""
        return self.total / len(self.passages)


@dataclass(frozen=True)
class EntityGraph:
    """Propositions (embeddings ``H``, owner passage rows) and their entity incidence ``A``."""

    H: np.ndarray
    owner: np.ndarray
    A: sp.csr_matrix
    At: sp.csr_matrix

    @classmethod
    def build(cls, passage_ids: Sequence[str], props: pl.DataFrame | pd.DataFrame,
              entities: pl.DataFrame | pd.DataFrame, incidence: pl.DataFrame | pd.DataFrame,
              H: np.ndarray) -> EntityGraph:
        """From the index tables (polars, or pandas from the methods' context): ``owner[i]`` =
        row of proposition i's passage in ``passage_ids``, A the proposition–entity incidence;
        ``props`` must be ordered by :func:`order_propositions` (the order of ``H``'s rows)."""
        rank = {pid: i for i, pid in enumerate(passage_ids)}
        owner = np.array([rank[p] for p in props["passage_id"].to_list()], dtype=np.int64)
        A = incidence_matrix(props["prop_id"].to_list(), entities["entity_id"].to_list(), incidence)
        return cls(np.ascontiguousarray(H, dtype=np.float32), owner, A, A.T.tocsr())

    @staticmethod
    def ordered(props: Table, passage_ids: Sequence[str]) -> Table:
        """Propositions in the index order (stored passage order, then ordinal), as the type
        given."""
        return order_propositions(props, list(passage_ids))

    def scores(self, h: np.ndarray) -> np.ndarray:
        """u_i = max(0, h_iᵀh) for every proposition."""
        return np.maximum((self.H @ h).astype(np.float64), 0.0)

    def link(self, vectors: np.ndarray, k: int) -> list[int]:
        """The ``k`` nearest propositions (positive similarity) of each vector, distinct, in
        vector order."""
        out: list[int] = []
        for v in vectors:
            u = self.scores(v)
            idx = top_k_indices(u, k)
            out += [int(i) for i in idx[u[idx] > 0]]
        return list(dict.fromkeys(out))

    def neighbours(self, prop: int) -> np.ndarray:
        """Propositions sharing at least one entity with ``prop`` (itself included)."""
        ents = self.A.indices[self.A.indptr[prop]:self.A.indptr[prop + 1]]
        if ents.size == 0:
            return np.zeros(0, dtype=np.int64)
        return np.unique(self.At[ents].indices)

    def expand(self, seeds: Sequence[int], u: np.ndarray, beam_size: int, hops: int,
               exclude: Collection[int] = ()) -> list[tuple[int, float]]:
        """Passages reached by the beam search from ``seeds`` (module docstring), best first,
        without the rows in ``exclude``."""
        beam = self._keep([Path(float(u[i]), (int(self.owner[i]),), int(i)) for i in seeds], beam_size)
        reached: dict[int, float] = {}
        for hop in range(hops + 1):
            if hop:
                beam = self._keep([p for path in beam for p in self._extend(path, u)], beam_size)
            for path in beam:
                end = path.passages[-1]
                reached[end] = max(reached.get(end, 0.0), path.score)
        ranked = sorted(reached.items(), key=lambda kv: (-kv[1], kv[0]))
        skip = set(exclude)
        return [(row, score) for row, score in ranked if row not in skip]

    def _extend(self, path: Path, u: np.ndarray) -> list[Path]:
        nbrs = self.neighbours(path.last)
        nbrs = nbrs[~np.isin(self.owner[nbrs], path.passages)]
        if nbrs.size == 0:
            return []
        best = self._best_per_passage(nbrs, u)
        return [Path(path.total + float(u[j]), path.passages + (int(self.owner[j]),), int(j)) for j in best]

    def _best_per_passage(self, props: np.ndarray, u: np.ndarray) -> np.ndarray:
        """For each passage among ``props``' owners, its highest-u proposition (lowest index on
        ties): only that one can end the best path into the passage."""
        order = np.lexsort((props, -u[props]))
        ranked = props[order]
        _, first = np.unique(self.owner[ranked], return_index=True)
        return ranked[np.sort(first)]

    @staticmethod
    def _keep(paths: list[Path], beam_size: int) -> list[Path]:
        """The ``beam_size`` best paths with distinct end passages (ties: lower end row)."""
        ranked = sorted(paths, key=lambda p: (-p.score, p.passages[-1], p.passages))
        out: list[Path] = []
        ends: set[int] = set()
        for p in ranked:
            if p.passages[-1] not in ends:
                ends.add(p.passages[-1])
                out.append(p)
                if len(out) == beam_size:
                    break
        return out

    def supporting_passages(self, vectors: np.ndarray, rows: Collection[int]) -> list[int]:
        """For each vector (a memory triple), the passage among ``rows`` owning its most similar
        proposition; distinct, in vector order (GeAR's memory-first merge)."""
        allowed = np.isin(self.owner, np.fromiter(rows, dtype=np.int64)) if rows else np.zeros_like(self.owner, bool)
        if not allowed.any():
            return []
        candidates = np.flatnonzero(allowed)
        out = []
        for v in vectors:
            sims = self.H[candidates] @ v
            out.append(int(self.owner[candidates[int(np.argmax(sims))]]))
        return list(dict.fromkeys(out))
