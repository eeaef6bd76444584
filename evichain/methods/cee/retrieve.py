"""CEE online retrieval for one question: exploration (Eq. 1), refinement (Eq. 2–6), coverage-aware
selection (Eq. 7–8), and the run rows and trace row.

The run lists the K_final greedy picks in pick order, then the rest of A(q) by s(d), at most
``top_k`` rows (20 by default); without coverage (ablation) A(q) ranked by s(d). Without
contrastive refinement (ablation) g = sim and s = s_base.

Trace (one row per question): ``probes`` and ``probe_rounds`` (P(q) with the round of each
probe; the question itself is the first probe of round 1 when ``question_as_probe``),
``summaries`` (e_1 … e_{T−1}), ``pool_sizes`` (|A_t(q)| per round), ``pool_size``,
``rounds_run``, ``stop_reason``, ``llm_failures`` (``round<t>:<step>:<kind>``),
``selected_ids`` (the greedy picks), ``n_pool_with_facets``, ``gold_in_pool``, ``n_gold``,
``llm_steps``, ``prompt_tokens``, ``completion_tokens`` (tokens of cache hits are the stored
ones, so the trace does not depend on the cache state). With ``bridge_expansion`` (variant
``robust``) also ``bridge_added`` (|⋃_t B_t(q)|), ``bridge_ids`` and ``bridge_rounds`` (the
passages the title links added, with their round, and ``bridge_source_ids``: the passage whose
text named each); without it these columns are absent, so the
paper-faithful variants' traces are unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from evichain.methods.base import QuestionResult
from evichain.methods.cee.bridge import BridgeIndex, inherit_scores
from evichain.methods.cee.explore import Encoder, ExploreLLM, Explorer, Exploration
from evichain.methods.cee.facets import Passage
from evichain.methods.cee.params import CEEParams
from evichain.methods.cee.scoring import FacetBank, PoolScores, score_pool
from evichain.methods.cee.selection import final_ranking


@dataclass(frozen=True)
class Ranked:
    """A pool's final ranking: corpus rows and run scores, and the pool's scores."""

    rows: list[int]
    scores: list[float]
    picks: list[int]
    pool: PoolScores


def rank_pool(P: np.ndarray, E: np.ndarray, bank: FacetBank, pool: Sequence[int],
              params: CEEParams, bridges: Sequence[int] = (),
              sources: Sequence[int] = ()) -> Ranked:
    """Eq. 2–8 over A(q) = ``pool`` (corpus rows, ascending) for probe embeddings P; with
    ``params.bridge_inherit`` > 0 the bridge passages ``bridges`` (corpus rows, in the order
    added, named by ``sources``) inherit a share of their source's s(d) before the selection
    (:func:`~evichain.methods.cee.bridge.inherit_scores`)."""
    rows = np.asarray(pool, dtype=np.int64)
    F, mask = bank.gather(rows) if params.contrastive else bank.gather(rows[:0])
    scores = score_pool(P, E[rows], F, mask, params.alpha, params.beta, params.contrastive)
    scores = replace(scores, s=inherit_scores(scores.s, rows, bridges, sources,
                                              params.bridge_inherit))
    order, run_scores = final_ranking(scores.s, scores.g, params.k_final, params.top_k,
                                      params.coverage, params.coverage_normalise)
    picks = order[:min(params.k_final, len(order))] if params.coverage else []
    return Ranked([int(rows[i]) for i in order], run_scores, [int(rows[i]) for i in picks], scores)


def run_rows(question_id: str, ranked: Ranked,
             passages: Sequence[Passage]) -> list[tuple[str, int, str, float]]:
    """The run rows (question_id, rank, passage_id, score) of a ranked pool."""
    return [(question_id, r + 1, passages[i].passage_id, float(s))
            for r, (i, s) in enumerate(zip(ranked.rows, ranked.scores))]


class CEERetriever:
    """Exploration, refinement and selection for one question at a time (thread-safe).

    With ``params.bridge_expansion`` the title matcher (:class:`BridgeIndex`) is built once
    here (or passed as ``bridge``) and shared by every question.
    """

    def __init__(self, E: np.ndarray, passages: Sequence[Passage], bank: FacetBank,
                 params: CEEParams, llm: ExploreLLM, encode: Encoder,
                 bridge: BridgeIndex | None = None) -> None:
        self.E = np.asarray(E, dtype=np.float64)
        self.passages = passages
        self.bank = bank
        self.params = params
        self.explorer = Explorer(self.E, passages, params, llm, encode, bridge)

    def retrieve(self, question_id: str, question: str, gold: Sequence[str] = ()) -> QuestionResult:
        """Run CEE for q; returns the run rows, the trace row and timings."""
        ex = self.explorer.run(question)
        start = time.perf_counter()
        ranked = rank_pool(ex.probe_vectors, self.E, self.bank, ex.pool, self.params,
                           ex.bridge_rows, ex.bridge_sources)
        compute = time.perf_counter() - start
        rows = run_rows(question_id, ranked, self.passages)
        trace = self._trace(question_id, ex, ranked, set(gold))
        return QuestionResult(rows, trace, {"llm": ex.llm_seconds, "encode": ex.encode_seconds,
                                            "compute": compute})

    def _trace(self, question_id: str, ex: Exploration, ranked: Ranked, gold: set[str]) -> dict[str, Any]:
        pool_ids = {self.passages[i].passage_id for i in ex.pool}
        pool_rows = np.asarray(ex.pool, dtype=np.int64)
        row: dict[str, Any] = {
            "question_id": question_id, "probes": list(ex.probes),
            "probe_rounds": [int(t) for t in ex.probe_rounds], "summaries": list(ex.summaries),
            "pool_sizes": [int(n) for n in ex.pool_sizes], "pool_size": len(ex.pool),
            "rounds_run": ex.rounds_run, "stop_reason": ex.stop_reason,
            "llm_failures": list(ex.failures),
            "selected_ids": [self.passages[i].passage_id for i in ranked.picks],
            "n_pool_with_facets": int((self.bank.count[pool_rows] > 0).sum()) if ex.pool else 0,
            "gold_in_pool": len(gold & pool_ids), "n_gold": len(gold),
            "llm_steps": ex.llm_steps, "prompt_tokens": ex.prompt_tokens,
            "completion_tokens": ex.completion_tokens}
        if self.params.bridge_expansion:
            row.update({"bridge_added": len(ex.bridge_rows),
                        "bridge_ids": [self.passages[i].passage_id for i in ex.bridge_rows],
                        "bridge_rounds": [int(t) for t in ex.bridge_rounds],
                        "bridge_source_ids": [self.passages[i].passage_id for i in ex.bridge_sources]})
        return row
