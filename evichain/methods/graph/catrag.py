"""CatRAG (Lau et al. 2026, "Breaking the Static Graph: Context-Aware Traversal for Robust
Retrieval-Augmented Generation", §3), re-implemented on the HippoRAG 2 index and graph.

CatRAG runs HippoRAG 2 (fact linking, recognition memory, seeds, dense passage weights, PPR
with damping 0.5; :mod:`.hipporag2`) on a query-conditioned copy of the transition structure.
The graph is walked as a directed graph (each undirected edge = two arcs) and only the out-arcs
of seed entities change, as per-arc multipliers on W (nothing is copied):

1. Key-fact passage weight enhancement: for every entity e of a kept fact, the arcs e → j to
   the passages j that state a kept fact containing e are multiplied by ``key_fact_boost``
   (2.5); then all of e's passage arcs are rescaled so that their total is unchanged.
2. Symbolic anchoring: the LLM lists the question's named entities; each mention (normalised,
   encoded) is linked to its most similar entity node; a linked node that is not already a
   seed gets the weak weight ε / |passages(e)| (ε = ``anchor_weight`` = 0.2).
3. Query-aware dynamic edge weighting: the ``max_scored_seeds`` (5) strongest seeds (entity
   weights, anchors included) have their relation neighbours (entities sharing a fact) scored
   0–10 by the LLM, ``score_batch`` per call; a seed with more than ``max_scored_edges`` (15)
   neighbours keeps the 15 whose best shared fact has the highest fact score, and the arcs to
   the others are multiplied by ``pruned_edge_factor`` (0.3). A score s maps to
   φ(s) = 0 (s ≤ 3), s/20 (4–6), (s − 3)/2 (7–9), 5 (10); every arc from a scored seed to a
   scored target is multiplied by ``edge_weight_scale`` (2) × max φ over the target's scores.
   A neighbour missing from the reply, or in a batch whose call failed (recorded), gets
   ``default_edge_score`` (4), as the released code does.

Departures: the paper's scorer also sees an LLM summary of each neighbour, generated offline
for every entity with more than three facts (one extra LLM call per such entity, far beyond
this machine's budget); we show the neighbour's own facts instead, as the code does for
entities without a summary, cut to the summaries' length (``neighbour_words`` = 150 words).
A scoring call whose prompt does not fit the model's context (a neighbour that shares many
facts with its seed; the offline model has 8,192 tokens, the paper's GPT-4o-mini 128k) is split
into halves, recursively, down to single neighbours; a single neighbour that still does not fit
is a failed call (recorded) and gets the default score.
The prompts are ours (JSON, neighbours by id) instead of the released few-shot templates. The
weak seed uses each anchor's own passage count (the released code divides by the count of the
last phrase handled, a slip). The question's NER is called only when the filter kept a fact
(the code calls both concurrently and discards the NER on the dense fallback: same rankings,
fewer calls).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from evichain.methods.graph.graph import normalize_phrase
from evichain.methods.graph.hipporag2 import HippoIndex, HippoRAG2Retriever, Work
from evichain.methods.graph.llm import GraphLLM, clean_mentions, clean_scores
from evichain.methods.graph.params import GraphParams
from evichain.methods.graph.ppr import arc_index
from evichain.retrieval.run import top_k_indices

PhraseEncoder = Callable[[list[str]], np.ndarray]
_REPAIR_COLUMNS = {"missing": "n_missing_scores", "unknown": "n_unknown_score_ids",
                   "duplicate": "n_duplicate_score_ids", "out_of_range": "n_out_of_range_scores"}

# Failures after which a scoring batch is split in halves: the prompt overflowed the context, or
# (replay) the batch has no recorded answer, as when the live run split it: rejections are never
# cached, so a replay finds the halves' answers only by splitting too.
_SPLIT_KINDS = frozenset({"context_window", "replay_miss"})


def project_score(score: int) -> float:
    """φ(s): the paper's non-linear projection of a 0–10 relevance score to an edge factor."""
    if score <= 3:
        return 0.0
    if score <= 6:
        return score / 20.0
    if score < 10:
        return (score - 3) / 2.0
    return 5.0


def key_fact_factors(passage_arcs: np.ndarray, boosted: np.ndarray, weights: np.ndarray,
                     boost: float) -> np.ndarray:
    """Multipliers for one entity's passage arcs: raw = w·(boost if boosted else 1), rescaled
    so Σ new = Σ w; factor = new / w. All ones when nothing is boosted."""
    if not boosted.any():
        return np.ones(passage_arcs.size)
    raw = weights * np.where(boosted, boost, 1.0)
    return np.where(boosted, boost, 1.0) * (weights.sum() / raw.sum())


class CatRAGRetriever(HippoRAG2Retriever):
    """HippoRAG 2 with CatRAG's anchoring, edge weighting and key-fact enhancement."""

    method = "catrag"

    def __init__(self, index: HippoIndex, params: GraphParams, llm: GraphLLM | None,
                 encode_phrases: PhraseEncoder) -> None:
        c = params.catrag
        if llm is None and (c.symbolic_anchoring or c.edge_weighting or params.hipporag2.recognition_memory):
            raise ValueError("these graph.catrag settings call the LLM but no client was given")
        super().__init__(index, params, llm)
        self.encode_phrases = encode_phrases
        self._entity_facts = index.fact_entities.T.tocsr()
        self._entity_passages = index.graph.mentions.T.tocsr()

    def _trace_defaults(self) -> dict[str, Any]:
        return {**super()._trace_defaults(), "anchor_status": "off", "anchor_mentions": [],
                "anchor_entities": [], "n_anchor_seeds": 0, "key_fact_entities": 0,
                "n_boosted_passage_arcs": 0, "scored_seeds": [], "n_scoring_calls": 0,
                "n_scoring_failed": 0, "n_scored_edges": 0, "n_pruned_edges": 0,
                "n_zeroed_edges": 0, "n_missing_scores": 0, "n_unknown_score_ids": 0,
                "n_duplicate_score_ids": 0, "n_out_of_range_scores": 0, "n_split_batches": 0}

    def _passage_arcs(self, e: int) -> tuple[np.ndarray, np.ndarray]:
        """Entity e's passage rows and the positions of its arcs e → passage in W.data."""
        M = self._entity_passages
        rows = M.indices[M.indptr[e]:M.indptr[e + 1]]
        return rows, arc_index(self.index.ppr.W, np.full(rows.size, e), self.index.graph.n_entities + rows)

    def _facts_of(self, e: int) -> np.ndarray:
        """Ids of the facts whose subject or object is entity e."""
        F = self._entity_facts
        return F.indices[F.indptr[e]:F.indptr[e + 1]]

    # ------------------------------------------------------------------ graph search
    def _graph_search(self, work: Work) -> np.ndarray:
        """Seeds, the three CatRAG changes, PPR on the reweighted arcs."""
        c = self.params.catrag
        w_e = self._entity_weights(work)
        scale = np.ones(self.index.ppr.W.nnz)
        if c.key_fact:
            self._key_fact(work, scale)
        if c.symbolic_anchoring:
            self._anchor(work, w_e)
        if c.edge_weighting:
            self._weight_edges(work, w_e, scale)
        return self._ppr_passages(work, w_e, scale)

    def _key_fact(self, work: Work, scale: np.ndarray) -> None:
        """Change 1 (module docstring): boost seed-entity arcs to passages of kept facts."""
        facts, W = self.index.facts, self.index.ppr.W
        entities = sorted({int(facts.subj[f]) for f in work.kept} | {int(facts.obj[f]) for f in work.kept})
        boosted_arcs = 0
        for e in entities:
            rows, arcs = self._passage_arcs(e)
            kept_with_e = [f for f in work.kept if e in (int(facts.subj[f]), int(facts.obj[f]))]
            stated = set(np.concatenate([facts.passages[f].indices for f in kept_with_e]).tolist())
            boosted = np.array([r in stated for r in rows], dtype=bool)
            valid = arcs >= 0
            factors = key_fact_factors(arcs[valid], boosted[valid], W.data[arcs[valid]],
                                       self.params.catrag.key_fact_boost)
            scale[arcs[valid]] *= factors
            boosted_arcs += int(boosted[valid].sum())
        work.trace["key_fact_entities"] = len(entities)
        work.trace["n_boosted_passage_arcs"] = boosted_arcs

    def _anchor(self, work: Work, w_e: np.ndarray) -> None:
        """Change 2: weak seeds from the question's named entities."""
        t, g = work.trace, self.index.graph
        raw, usage = self.llm.query_entities(work.question)  # type: ignore[union-attr]
        work.charge(usage, "query_ner")
        t["anchor_status"] = "ok" if usage.ok else f"llm_{usage.kind}"
        mentions = [m for m in (normalize_phrase(x) for x in clean_mentions(raw)) if m]
        t["anchor_mentions"] = mentions
        if not mentions or g.n_entities == 0:
            return
        start = time.perf_counter()
        vectors = self.encode_phrases(mentions)
        work.encode_s += time.perf_counter() - start
        nearest = [int(np.argmax(self.index.entity_vectors @ v)) for v in vectors]
        anchors = list(dict.fromkeys(nearest))
        t["anchor_entities"] = [g.entity_names[e] for e in anchors]
        counts = g.passages_per_entity
        added = 0
        for e in anchors:
            if w_e[e] == 0:
                w_e[e] = self.params.catrag.anchor_weight / (counts[e] if counts[e] > 0 else 1)
                added += 1
        t["n_anchor_seeds"] = added

    # ------------------------------------------------------------------ edge weighting
    def _neighbours(self, e: int, fact_scores: np.ndarray) -> dict[int, tuple[list[int], float]]:
        """Relation neighbours of e: target → (shared fact ids, best shared fact score)."""
        facts = self.index.facts
        out: dict[int, tuple[list[int], float]] = {}
        for f in self._facts_of(e):
            other = int(facts.obj[f]) if int(facts.subj[f]) == e else int(facts.subj[f])
            if other == e:
                continue
            shared, best = out.get(other, ([], -np.inf))
            out[other] = (shared + [int(f)], max(best, float(fact_scores[f])))
        return out

    def _scored_seeds(self, w_e: np.ndarray) -> np.ndarray:
        seeds = np.flatnonzero(w_e > 0)
        return seeds[top_k_indices(w_e[seeds], self.params.catrag.max_scored_seeds)]

    def _weight_edges(self, work: Work, w_e: np.ndarray, scale: np.ndarray) -> None:
        """Change 3: LLM-scored multipliers on the seeds' relation arcs (module docstring)."""
        c, t, g = self.params.catrag, work.trace, self.index.graph
        seeds = self._scored_seeds(w_e)
        t["scored_seeds"] = [g.entity_names[e] for e in seeds]
        factor: dict[int, float] = {}
        pruned: set[int] = set()
        for e in seeds:
            nb = self._neighbours(int(e), work.fact_scores)
            order = sorted(nb, key=lambda n: (-nb[n][1], n))
            chosen, rest = order[:c.max_scored_edges], order[c.max_scored_edges:]
            pruned.update(rest)
            t["n_pruned_edges"] += len(rest)
            for start in range(0, len(chosen), c.score_batch):
                batch = chosen[start:start + c.score_batch]
                for n, s in self._score_batch(work, int(e), batch, nb).items():
                    factor[n] = max(factor.get(n, 0.0), c.edge_weight_scale * project_score(s))
        t["n_zeroed_edges"] = sum(1 for v in factor.values() if v == 0.0)
        self._apply_edge_factors(seeds, factor, pruned - set(factor), scale)

    def _score_batch(self, work: Work, e: int, batch: Sequence[int],
                     nb: dict[int, tuple[list[int], float]]) -> dict[int, int]:
        """One scoring call for up to ``score_batch`` neighbours of seed e; target → score."""
        c, t, g, facts = self.params.catrag, work.trace, self.index.graph, self.index.facts
        neighbours = [{"id": k + 1, "entity": g.entity_names[n],
                       "linking_facts": [list(facts.facts[f]) for f in nb[n][0]],
                       "facts": self._other_facts(n, set(nb[n][0]))} for k, n in enumerate(batch)]
        raw, usage = self.llm.score_edges(  # type: ignore[union-attr]
            work.question, [facts.facts[f] for f in work.kept], g.entity_names[e], neighbours)
        if usage.kind in _SPLIT_KINDS and len(batch) > 1:
            return self._split_batch(work, e, batch, nb, usage.seconds)
        work.charge(usage, "edge_score")
        t["n_scoring_calls"] += 1
        t["n_scoring_failed"] += 0 if usage.ok else 1
        scores, counts = clean_scores(raw, [n["id"] for n in neighbours], c.default_edge_score)
        for key, column in _REPAIR_COLUMNS.items():
            t[column] += counts[key]
        t["n_scored_edges"] += len(batch)
        return {n: scores[k + 1] for k, n in enumerate(batch)}

    def _split_batch(self, work: Work, e: int, batch: Sequence[int],
                     nb: dict[int, tuple[list[int], float]], seconds: float) -> dict[int, int]:
        """A batch whose call failed with a ``_SPLIT_KINDS`` kind (prompt over the model's
        context; in a replay, no recorded answer): score each half on its own. The failed
        request used no tokens; it is counted in ``n_split_batches``, not as a scoring call."""
        work.trace["n_split_batches"] += 1
        work.llm_s += seconds
        half = (len(batch) + 1) // 2
        return {**self._score_batch(work, e, batch[:half], nb),
                **self._score_batch(work, e, batch[half:], nb)}

    def _other_facts(self, n: int, linking: set[int]) -> list[list[str]]:
        """The neighbour's facts other than the linking ones, in order, while their words
        total at most ``neighbour_words`` (the length of the paper's neighbour summaries)."""
        out: list[list[str]] = []
        words = 0
        for f in self._facts_of(n):
            if int(f) in linking:
                continue
            fact = list(self.index.facts.facts[int(f)])
            words += sum(len(part.split()) for part in fact)
            if words > self.params.catrag.neighbour_words:
                break
            out.append(fact)
        return out

    def _apply_edge_factors(self, seeds: np.ndarray, factor: dict[int, float], pruned: set[int],
                            scale: np.ndarray) -> None:
        """Multiply every arc seed → target by the target's factor (pruned: the fixed factor)."""
        W = self.index.ppr.W
        targets = {**{n: f for n, f in factor.items()},
                   **{n: self.params.catrag.pruned_edge_factor for n in pruned}}
        if not targets:
            return
        cols = np.array(sorted(targets), dtype=np.int64)
        mult = np.array([targets[n] for n in cols])
        for e in seeds:
            arcs = arc_index(W, np.full(cols.size, int(e)), cols)
            ok = arcs >= 0
            scale[arcs[ok]] *= mult[ok]
