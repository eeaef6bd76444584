"""PropRAG (Wang & Han 2025, "PropRAG: Guiding Retrieval with Beam Search over Proposition
Paths", §3), re-implemented on the EviReform proposition index (``propositions``, canonical
``entities`` and ``incidence`` tables), LLM-free at query time.

Index: propositions (vectors h_i, owner passage π(i)), their canonical entities (incidence A),
and the entity–passage graph of :mod:`.graph` whose relation edges join the entities of one
proposition. Two propositions are connected when they share an entity or hold two entities
joined by a synonymy edge of cosine ≥ ``synonym_threshold`` (0.75): the neighbours of i are the
non-zeros of A_i·L·Aᵀ with L = I + [S ≥ τ] (sparse row products, no M × M matrix).

Beam search (per question, vector h_q): the ``n_candidates`` (200) propositions with the
highest h_iᵀh_q are the pool; the beam starts with the best ``beam_width`` (4) single
propositions (score h_iᵀh_q); at each depth up to ``max_path_length`` (3) every beam path is
extended by each connected proposition and by the best ``parallel_seeds`` (3) propositions
(parallel reasoning), never repeating a proposition or an already generated set; candidates
are scored without an LLM by cos(h_q, φ(path)) with φ = the encoder applied to the
concatenated path text (or the renormalised mean of h_i, ``average``; with ``prefilter_k``
> 0 the mean ranks all candidates and only the top ``prefilter_k`` are re-encoded); the best
``beam_width`` form the next beam. All beams are kept as the path set.

Seeds and ranking: an entity's path scores are the scores of every path that contains one of
its propositions (once per proposition), plus, for a step i → j joined only by a synonymy edge,
the scores of the paths through it for j's synonymous entities. Stage 1: the top
``stage1_entities`` (40) entities (by summed score) of the top ``stage1_paths`` (20) paths get
weight 1, passages ``passage_node_weight`` × minmax(dense); PPR (damping 0.75) over the graph
gives s¹. Stage 2 (refined seeds): beam search again over the propositions of the top
``focus_top_k`` (50) passages of s¹, within the subgraph of those passages and their entities;
seeds = max(minmax(best path score of the top ``stage2_entities`` entities of the top
``stage2_paths`` paths), minmax(same for the initial beam)) + the focused passages' dense
weights; PPR (damping 0.45) on the subgraph. Final score: focused passages take their subgraph
PPR score, the others s¹_j × ``outside_focus_scale`` × min(subgraph PPR).

Departures: the index is EviReform's (LLM or sentence propositions with canonicalised entities)
instead of PropRAG's own LLM extraction; negative path scores carry no seed mass (clipped at 0
before min–max); ``prefilter_k`` ranks candidates by the mean vector before re-encoding (the
released code re-encodes every candidate; 2 CPU cores cannot, ``prefilter_k: 0`` does).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import scipy.sparse as sp

from evichain.retrieval.incidence import incidence_matrix, order_propositions
from evichain.methods.graph.graph import (EntityGraph, build_graph, min_max,
                                          proposition_occurrences, synonymy_matrix)
from evichain.methods.graph.hipporag2 import QuestionResult, base_trace, passage_seed_weights
from evichain.methods.graph.params import GraphParams, PropRAGParams
from evichain.methods.graph.ppr import PPR, run_ppr
from evichain.retrieval.run import top_k_indices

Encoder = Callable[[list[str], str], np.ndarray]
TextEncoder = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class PropIndex:
    """Propositions, incidence, connectivity and the entity–passage graph."""

    graph: EntityGraph
    prop_ids: np.ndarray
    texts: list[str]
    owner: np.ndarray
    H: np.ndarray
    A: sp.csr_matrix
    AT: sp.csr_matrix
    link: sp.csr_matrix
    passage_vectors: np.ndarray
    ppr: PPR


def build_prop_index(corpus: pl.DataFrame, props: pl.DataFrame, entities: pl.DataFrame,
                     incidence: pl.DataFrame, encode: Encoder, params: GraphParams) -> PropIndex:
    """The PropRAG index from the EviReform tables (``encode(texts, label)``: L2-normalised);
    ``owner[i]`` = corpus row of proposition i's passage."""
    passage_ids = corpus["passage_id"].to_list()
    props = order_propositions(props, passage_ids)
    rank = {p: j for j, p in enumerate(passage_ids)}
    owner = np.array([rank[p] for p in props["passage_id"].to_list()], dtype=np.int64)
    A = incidence_matrix(props["prop_id"].to_list(), entities["entity_id"].to_list(), incidence)
    names = [str(n) for n in entities["name"].to_list()]
    E = encode(names, "entities")
    S = synonymy_matrix(names, E, params.synonymy_threshold, params.synonymy_topk,
                        params.synonymy_max_per_node, params.synonymy_min_chars)
    graph = build_graph(names, passage_ids, proposition_occurrences(owner, A), S)
    strong = S.maximum(S.T).tocsr()
    strong.data = (strong.data >= params.proprag.synonym_threshold).astype(np.float64)
    link = (sp.identity(len(names), format="csr") + strong).tocsr()
    link.eliminate_zeros()
    texts = [" ".join(str(t).split()) for t in props["text"].to_list()]
    H = encode(texts, "propositions")
    if H.shape[0] != len(texts):
        raise ValueError(f"{H.shape[0]} embeddings for {len(texts)} propositions")
    passages = [params.passage_format.format(title=t, text=x)
                for t, x in zip(corpus["title"].to_list(), corpus["text"].to_list())]
    prop_ids = np.array(props["prop_id"].to_list(), dtype=object)
    return PropIndex(graph, prop_ids, texts, owner, H, A, A.T.tocsr(), link,
                     encode(passages, "passages"),
                     PPR(graph.W, params.ppr_backend, params.ppr_tol, params.ppr_max_iter))


# --------------------------------------------------------------------------- beam search
@dataclass(frozen=True)
class Path:
    """A proposition path and its score."""

    props: tuple[int, ...]
    score: float


@dataclass
class SearchStats:
    """Counts of one beam search (trace)."""

    candidates: int = 0
    reencoded: int = 0
    encode_s: float = 0.0


def _row(mat: sp.csr_matrix, i: int) -> np.ndarray:
    return mat.indices[mat.indptr[i]:mat.indptr[i + 1]]


class BeamSearch:
    """LLM-free beam search over proposition paths (module docstring)."""

    def __init__(self, index: PropIndex, params: PropRAGParams, encode_texts: TextEncoder) -> None:
        self.index = index
        self.params = params
        self.encode_texts = encode_texts

    def neighbours(self, i: int, allowed: np.ndarray | None) -> np.ndarray:
        """Propositions connected to i (shared or synonymous entity), within ``allowed``."""
        ix = self.index
        ents = _row(ix.A, i)
        if ents.size == 0:
            return np.zeros(0, dtype=np.int64)
        expanded = np.unique(ix.link[ents].indices)
        props = np.unique(ix.AT[expanded].indices)
        if allowed is not None:
            props = props[allowed[props]]
        return props[props != i]

    def search(self, h_q: np.ndarray, allowed: np.ndarray | None, stats: SearchStats
               ) -> tuple[list[Path], list[Path]]:
        """All kept paths (best first) and the initial beam."""
        p, u = self.params, (self.index.H @ h_q).astype(np.float64)
        pool = np.flatnonzero(allowed) if allowed is not None else np.arange(u.size)
        if pool.size == 0:
            return [], []
        ranked = pool[top_k_indices(u[pool], p.n_candidates)]
        initial = [Path((int(i),), float(u[i])) for i in ranked[:p.beam_width]]
        parallel = [int(i) for i in ranked[:p.parallel_seeds]]
        beam, kept = list(initial), list(initial)
        seen = {frozenset(x.props) for x in initial}
        for _ in range(2, p.max_path_length + 1):
            cands = self._extensions(beam, parallel, allowed, seen)
            if not cands:
                break
            scores = self._score(cands, h_q, stats)
            order = [k for k in np.argsort(-scores, kind="stable") if np.isfinite(scores[k])]
            beam = [Path(cands[k], float(scores[k])) for k in order[:p.beam_width]]
            kept += beam
        order = np.argsort([-x.score for x in kept], kind="stable")
        return [kept[k] for k in order], initial

    def _extensions(self, beam: Sequence[Path], parallel: Sequence[int], allowed: np.ndarray | None,
                    seen: set[frozenset[int]]) -> list[tuple[int, ...]]:
        """New candidate paths: each beam path + a connected or parallel proposition."""
        cache: dict[int, np.ndarray] = {}
        out: list[tuple[int, ...]] = []
        for path in beam:
            last = path.props[-1]
            if last not in cache:
                cache[last] = self.neighbours(last, allowed)
            linked = cache[last]
            extra = [j for j in parallel if j != last and not np.isin(j, linked)]
            for j in [*linked.tolist(), *extra]:
                if j in path.props:
                    continue
                key = frozenset((*path.props, j))
                if key not in seen:
                    seen.add(key)
                    out.append((*path.props, j))
        return out

    def average_scores(self, cands: Sequence[tuple[int, ...]], h_q: np.ndarray) -> np.ndarray:
        """cos(h_q, Σ_{i ∈ path} h_i) for equal-length paths (vectorised)."""
        V = self.index.H[np.asarray(cands, dtype=np.int64)].sum(axis=1).astype(np.float64)
        norms = np.linalg.norm(V, axis=1)
        return np.divide(V @ h_q, norms, out=np.zeros(len(cands)), where=norms > 0)

    def concatenated_scores(self, cands: Sequence[tuple[int, ...]], h_q: np.ndarray,
                            stats: SearchStats) -> np.ndarray:
        """cos(h_q, encoder(" ".join(path texts)))."""
        start = time.perf_counter()
        vecs = self.encode_texts([" ".join(self.index.texts[i] for i in c) for c in cands])
        stats.encode_s += time.perf_counter() - start
        stats.reencoded += len(cands)
        return (vecs @ h_q).astype(np.float64)

    def _score(self, cands: list[tuple[int, ...]], h_q: np.ndarray, stats: SearchStats) -> np.ndarray:
        p = self.params
        stats.candidates += len(cands)
        avg = self.average_scores(cands, h_q)
        if p.path_scoring == "average":
            return avg
        if p.prefilter_k == 0 or len(cands) <= p.prefilter_k:
            return self.concatenated_scores(cands, h_q, stats)
        top = top_k_indices(avg, p.prefilter_k)
        scores = np.full(len(cands), -np.inf)
        scores[top] = self.concatenated_scores([cands[k] for k in top], h_q, stats)
        return scores

    # ------------------------------------------------------------------ seeds
    def synonym_targets(self, a: int, b: int) -> list[int]:
        """Entities of b reached from a only through a synonymy edge (none if a, b share one)."""
        ea, eb = _row(self.index.A, a), _row(self.index.A, b)
        if np.intersect1d(ea, eb).size or ea.size == 0:
            return []
        reach = np.unique(self.index.link[ea].indices)
        return [int(e) for e in eb if e in set(reach.tolist())]

    def path_entities(self, paths: Sequence[Path]) -> list[tuple[int, list[float]]]:
        """(entity, path scores) sorted by summed score (ties: entity index)."""
        scores: dict[int, list[float]] = {}
        for path in paths:
            for a, b in zip(path.props, path.props[1:]):
                for e in self.synonym_targets(a, b):
                    scores.setdefault(e, []).append(path.score)
            for i in path.props:
                for e in _row(self.index.A, i):
                    scores.setdefault(int(e), []).append(path.score)
        return sorted(scores.items(), key=lambda kv: (-sum(kv[1]), kv[0]))


# --------------------------------------------------------------------------- retrieval
@dataclass
class _Work:
    h: np.ndarray
    dense_w: np.ndarray
    trace: dict[str, Any]
    stats: SearchStats = field(default_factory=SearchStats)


class PropRAGRetriever:
    """Two-stage PropRAG for one question at a time (thread-safe)."""

    method = "proprag"

    def __init__(self, index: PropIndex, params: GraphParams, encode_texts: TextEncoder) -> None:
        self.index = index
        self.params = params
        self.beam = BeamSearch(index, params.proprag, encode_texts)

    def retrieve(self, question_id: str, question: str, h_q: np.ndarray) -> QuestionResult:
        """Rank passages for one question (module docstring)."""
        start = time.perf_counter()
        dense = self.index.passage_vectors @ h_q
        work = _Work(h_q, passage_seed_weights(dense, self.params.passage_node_weight),
                     {**base_trace(question_id), "stage1_paths": [], "stage1_seed_entities": [],
                      "n_focus_passages": 0, "n_focus_propositions": 0, "stage2_paths": [],
                      "stage2_seed_entities": [], "n_path_candidates": 0, "n_reencoded_paths": 0})
        scores = self._stage1(work)
        if scores is None:
            work.trace["fallback"] = "dense"
            scores = min_max(dense)
        else:
            scores = self._stage2(work, scores)
        work.trace.update(n_path_candidates=work.stats.candidates, n_reencoded_paths=work.stats.reencoded)
        order = top_k_indices(scores, self.params.top_k)
        pids = self.index.graph.passage_ids
        rows = [(question_id, r + 1, str(pids[j]), float(scores[j])) for r, j in enumerate(order)]
        total = time.perf_counter() - start
        return QuestionResult(rows, work.trace, {"total": total, "llm": 0.0, "encode": work.stats.encode_s,
                                                 "compute": max(0.0, total - work.stats.encode_s)})

    def _describe(self, paths: Sequence[Path]) -> list[str]:
        return [" > ".join(str(self.index.prop_ids[i]) for i in p.props) + f" ({p.score:.4f})"
                for p in paths]

    def _stage1(self, work: _Work) -> np.ndarray | None:
        """Beam search over all propositions, path-entity seeds, PPR (damping 0.75)."""
        p, g = self.params.proprag, self.index.graph
        paths, _ = self.beam.search(work.h, None, work.stats)
        top = paths[:p.stage1_paths]
        ents = [e for e, _ in self.beam.path_entities(top)[:p.stage1_entities]]
        work.trace["stage1_paths"] = self._describe(top)
        work.trace["stage1_seed_entities"] = [g.entity_names[e] for e in ents]
        w_e = np.zeros(g.n_entities)
        w_e[ents] = 1.0
        reset = np.concatenate([w_e, work.dense_w])
        if reset.sum() <= 0:
            return None
        return self.index.ppr.run(reset, p.stage1_damping)[g.n_entities:]

    def _stage2(self, work: _Work, s1: np.ndarray) -> np.ndarray:
        """Refined seeds over the focused subgraph; merge with stage 1 (module docstring)."""
        p, g, ix = self.params.proprag, self.index.graph, self.index
        focus = np.sort(top_k_indices(s1, p.focus_top_k))
        in_focus = np.zeros(g.n_passages, dtype=bool)
        in_focus[focus] = True
        allowed = in_focus[ix.owner]
        work.trace.update(n_focus_passages=int(focus.size), n_focus_propositions=int(allowed.sum()))
        sub_ents = np.unique(g.mentions[focus].indices)
        paths, initial = self.beam.search(work.h, allowed, work.stats)
        top = paths[:p.stage2_paths]
        work.trace["stage2_paths"] = self._describe(top)
        pos = {int(e): k for k, e in enumerate(sub_ents)}
        phrase = np.maximum(self._best_scores(top, pos, sub_ents.size),
                            self._best_scores(initial, pos, sub_ents.size))
        work.trace["stage2_seed_entities"] = [g.entity_names[sub_ents[k]] for k in np.flatnonzero(phrase > 0)]
        reset = np.concatenate([phrase, work.dense_w[focus]])
        if reset.sum() <= 0:
            work.trace["fallback"] = "stage1"
            return s1
        nodes = np.concatenate([sub_ents, g.n_entities + focus])
        sub = run_ppr(ix.ppr.W[nodes][:, nodes], reset, p.stage2_damping, self.params.ppr_backend,
                      self.params.ppr_tol, self.params.ppr_max_iter)
        final = s1 * (p.outside_focus_scale * float(sub.min()))
        final[focus] = sub[sub_ents.size:]
        return final

    def _best_scores(self, paths: Sequence[Path], pos: dict[int, int], n: int) -> np.ndarray:
        """Best path score of the top ``stage2_entities`` entities of ``paths`` (clipped at 0),
        min–max normalised over the subgraph vector (whose passage entries are 0: w / max w)."""
        w = np.zeros(n)
        for e, scores in self.beam.path_entities(paths)[:self.params.proprag.stage2_entities]:
            if e in pos:
                w[pos[e]] = max(0.0, max(scores))
        return w / w.max() if w.max() > 0 else w
