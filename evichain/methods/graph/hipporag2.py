"""HippoRAG 2 (Gutiérrez et al. 2025, "From RAG to Memory", §3), re-implemented on the shared
OpenIE index (:mod:`.openie`) and entity–passage graph (:mod:`.graph`).

Per question q (embedding h_q; all vectors L2-normalised):

1. Fact linking: s_f = minmax_f(h_fᵀh_q) over every fact f; candidates = the ``linking_top_k``
   (5) highest (ties: lower fact index).
2. Recognition memory: the LLM keeps the candidates relevant to q (≤ ``filter_max_kept``);
   unknown / repeated ids are dropped and counted. No kept fact (or a failed call, recorded in
   the trace) → the dense passage ranking is returned (the paper's fallback).
3. Seeds: every entity e of a kept fact gets w_e = mean over its kept facts f of
   s_f / |passages(e)| (node specificity); only the ``linking_top_k`` entities with the highest
   w_e keep their weight. Every passage j gets ``passage_node_weight`` (0.05) ×
   minmax_j(h_jᵀh_q).
4. PPR over the graph with damping 0.5 and reset ∝ (w_entities, w_passages); passages are
   ranked by their PPR score (ties: corpus order), top ``top_k`` (200) written.

Departures: MiniLM (or the configured encoder) without the NV-Embed query instructions; the
recognition-memory prompt is ours (JSON, facts by id) instead of the released DSPy few-shot
prompt; entity weights use the mean over kept facts (the later released code; an earlier
release kept the last fact's score).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import scipy.sparse as sp

from evichain.llm.usage import StepUsage
from evichain.methods.base import QuestionResult
from evichain.methods.graph.graph import (EntityGraph, FactIndex, build_graph, min_max,
                                          synonymy_matrix, triple_facts)
from evichain.methods.graph.llm import GraphLLM, clean_kept
from evichain.methods.graph.params import GraphParams
from evichain.methods.graph.ppr import PPR
from evichain.retrieval.run import top_k_indices

Encoder = Callable[[list[str], str], np.ndarray]


@dataclass(frozen=True)
class HippoIndex:
    """Graph, facts and the vectors of facts, entities and passages."""

    graph: EntityGraph
    facts: FactIndex
    fact_entities: sp.csr_matrix
    fact_vectors: np.ndarray
    entity_vectors: np.ndarray
    passage_vectors: np.ndarray
    ppr: PPR


def build_hippo_index(corpus: pl.DataFrame, triples: pd.DataFrame, encode: Encoder,
                      params: GraphParams) -> HippoIndex:
    """The shared HippoRAG 2 / CatRAG index from the OpenIE triples (``encode(texts, label)``
    returns L2-normalised vectors; ``triples`` pandas: graph.triple_facts reads it)."""
    passage_ids = corpus["passage_id"].to_list()
    names, facts, occ = triple_facts(triples, passage_ids)
    E = encode(names, "entities")
    S = synonymy_matrix(names, E, params.synonymy_threshold, params.synonymy_topk,
                        params.synonymy_max_per_node, params.synonymy_min_chars)
    graph = build_graph(names, passage_ids, occ, S)
    texts = [params.passage_format.format(title=t, text=x)
             for t, x in zip(corpus["title"].to_list(), corpus["text"].to_list())]
    return HippoIndex(graph, facts, facts.entity_incidence(len(names)), encode(facts.texts, "facts"), E,
                      encode(texts, "passages"),
                      PPR(graph.W, params.ppr_backend, params.ppr_tol, params.ppr_max_iter))


# --------------------------------------------------------------------------- equations
def linked_facts(scores: np.ndarray, k: int) -> np.ndarray:
    """Step 1: the ``k`` highest fact scores (ties: lower index)."""
    return top_k_indices(scores, k)


def entity_seed_weights(facts: FactIndex, kept: Sequence[int], fact_scores: np.ndarray,
                        passages_per_entity: np.ndarray, top_k: int) -> np.ndarray:
    """Step 3: w_e = mean_{f ∋ e} s_f / |passages(e)| over kept facts, zero outside the top
    ``top_k`` entities (ties: lower entity index)."""
    E = passages_per_entity.shape[0]
    total, count = np.zeros(E), np.zeros(E)
    for f in kept:
        for e in {int(facts.subj[f]), int(facts.obj[f])}:
            n = passages_per_entity[e]
            total[e] += fact_scores[f] / n if n > 0 else fact_scores[f]
            count[e] += 1
    w = np.divide(total, count, out=np.zeros(E), where=count > 0)
    seeded = np.flatnonzero(count > 0)
    if seeded.size > top_k:
        keep = seeded[top_k_indices(w[seeded], top_k)]
        mask = np.zeros(E, dtype=bool)
        mask[keep] = True
        w[~mask] = 0.0
    return w


def passage_seed_weights(dense: np.ndarray, passage_node_weight: float) -> np.ndarray:
    """Step 3: passage_node_weight × minmax(dense scores)."""
    return passage_node_weight * min_max(dense)


# --------------------------------------------------------------------------- retrieval


@dataclass
class Work:
    """Per-question state."""

    question_id: str
    question: str
    h: np.ndarray
    trace: dict[str, Any]
    fact_scores: np.ndarray = field(default_factory=lambda: np.zeros(0))
    dense: np.ndarray = field(default_factory=lambda: np.zeros(0))
    kept: list[int] = field(default_factory=list)
    llm_s: float = 0.0
    encode_s: float = 0.0

    def charge(self, usage: StepUsage, step: str) -> None:
        """Add an LLM step's tokens and time; record the first failure."""
        self.llm_s += usage.seconds
        self.trace["prompt_tokens"] += usage.prompt_tokens
        self.trace["completion_tokens"] += usage.completion_tokens
        self.trace["llm_calls"] += 1
        if not usage.ok:
            self.trace["n_failed_calls"] += 1
            if self.trace["status"] == "ok":
                self.trace.update(status="failed", error_kind=usage.kind, failed_step=step)


def base_trace(question_id: str) -> dict[str, Any]:
    """Trace fields every graph method writes."""
    return {"question_id": question_id, "status": "ok", "error_kind": "", "failed_step": "",
            "llm_calls": 0, "n_failed_calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
            "fallback": ""}


class HippoRAG2Retriever:
    """Steps 1–4 for one question at a time (thread-safe: no shared mutable state)."""

    method = "hipporag2"

    def __init__(self, index: HippoIndex, params: GraphParams, llm: GraphLLM | None) -> None:
        if params.hipporag2.recognition_memory and llm is None:
            raise ValueError("graph.hipporag2.recognition_memory calls the LLM but no client was given")
        self.index = index
        self.params = params
        self.llm = llm

    def retrieve(self, question_id: str, question: str, h_q: np.ndarray) -> QuestionResult:
        """Rank passages for one question (module docstring)."""
        start = time.perf_counter()
        work = Work(question_id, question, h_q, {**base_trace(question_id), **self._trace_defaults()})
        has_facts = len(self.index.facts.facts) > 0
        work.fact_scores = min_max(self.index.fact_vectors @ h_q) if has_facts else np.zeros(0)
        work.dense = self.index.passage_vectors @ h_q
        self._recognise(work)
        scores = self._graph_search(work) if work.kept else self._dense_fallback(work)
        order = top_k_indices(scores, self.params.top_k)
        pids = self.index.graph.passage_ids
        rows = [(question_id, r + 1, str(pids[j]), float(scores[j])) for r, j in enumerate(order)]
        total = time.perf_counter() - start
        seconds = {"total": total, "llm": work.llm_s, "encode": work.encode_s,
                   "compute": max(0.0, total - work.llm_s - work.encode_s)}
        return QuestionResult(rows, work.trace, seconds)

    def _trace_defaults(self) -> dict[str, Any]:
        return {"candidate_facts": [], "kept_facts": [], "n_kept": 0, "filter_status": "off",
                "n_unknown_fact_ids": 0, "n_duplicate_fact_ids": 0, "seed_entities": [],
                "n_seed_entities": 0}

    # ------------------------------------------------------------------ steps 1–2
    def _recognise(self, work: Work) -> None:
        """Steps 1–2: linked facts and the recognition-memory filter."""
        p, t = self.params.hipporag2, work.trace
        cand = linked_facts(work.fact_scores, p.linking_top_k) if work.fact_scores.size else np.zeros(0, int)
        facts = self.index.facts.facts
        t["candidate_facts"] = [list(facts[i]) for i in cand]
        if cand.size == 0:
            t["filter_status"] = "no_facts"
            return
        if not p.recognition_memory:
            work.kept = [int(i) for i in cand]
        else:
            items = [(int(i), facts[i]) for i in cand]
            raw, usage = self.llm.filter(work.question, items, p.filter_max_kept)  # type: ignore[union-attr]
            work.charge(usage, "filter")
            work.kept, t["n_unknown_fact_ids"], t["n_duplicate_fact_ids"] = clean_kept(
                raw or [], cand.tolist(), p.filter_max_kept)
            t["filter_status"] = "ok" if usage.ok else f"llm_{usage.kind}"
            if usage.ok and not work.kept:
                t["filter_status"] = "empty"
        t["kept_facts"] = [list(facts[i]) for i in work.kept]
        t["n_kept"] = len(work.kept)

    def _dense_fallback(self, work: Work) -> np.ndarray:
        """No kept fact: the dense passage ranking (min–max scores)."""
        work.trace["fallback"] = "dense"
        return min_max(work.dense)

    # ------------------------------------------------------------------ steps 3–4
    def _entity_weights(self, work: Work) -> np.ndarray:
        g = self.index.graph
        w = entity_seed_weights(self.index.facts, work.kept, work.fact_scores,
                                g.passages_per_entity, self.params.hipporag2.linking_top_k)
        seeds = np.flatnonzero(w > 0)
        work.trace["seed_entities"] = [g.entity_names[e] for e in seeds[np.argsort(-w[seeds], kind="stable")]]
        work.trace["n_seed_entities"] = int(seeds.size)
        return w

    def _graph_search(self, work: Work) -> np.ndarray:
        """Steps 3–4: seed weights, PPR, passage scores."""
        w_e = self._entity_weights(work)
        return self._ppr_passages(work, w_e, None)

    def _ppr_passages(self, work: Work, w_e: np.ndarray, scale: np.ndarray | None) -> np.ndarray:
        """PPR from entity weights ``w_e`` plus passage weights; passage-node scores."""
        g, p = self.index.graph, self.params
        reset = np.concatenate([w_e, passage_seed_weights(work.dense, p.passage_node_weight)])
        if reset.sum() <= 0:
            return self._dense_fallback(work)
        scores = self.index.ppr.run(reset, p.damping, scale)
        return scores[g.n_entities:]
