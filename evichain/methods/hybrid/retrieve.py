"""The ``hybrid`` variant: EviReform ``robust`` (Steps 1–7 with backstop and backfill) builds
the pool; CEE's coverage-aware greedy selection (CEE §2.3.4, Eq. 7–8) orders it.

Per question q, after Step 7:

* pool A(q) = the readout's top ``coverage_pool`` passages (zero tail by ``tail_order``);
* aspects P(q) = {q} ∪ the valid residual queries ρ (EviReform Step 4: what the evidence
  still lacks, the analogue of CEE's probes);
* g(p, d) = max_{i ∈ P_d} max(0, h_iᵀh_p): how well d's best proposition answers aspect p;
* s(d) = score(d) / max_{d′ ∈ A(q)} score(d′), the readout normalised over the pool;
* d* = argmax_{d ∉ S} s(d) + λ Δ_cov(d | S)/|P(q)|, Δ_cov of CEE Eq. 7 — computed by CEE's
  own :func:`~evichain.methods.cee.selection.greedy_select` on g′ = λ g/|P(q)| (Δ_cov is
  positively homogeneous in g, so scaling g scales the gain).

Every pool passage is picked greedily (min(top_k, |A(q)|) picks, run score = the utility at
its pick); passages below the pool follow in readout order. The LLM calls are EviReform's
(``full``'s prompts), so the variant replays from ``full``'s recorded answers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evichain.methods.cee.selection import greedy_select
from evichain.methods.evireform.index import EviReformIndex
from evichain.methods.evireform.llm_steps import EviReformLLM
from evichain.methods.evireform.params import EviReformParams
from evichain.methods.evireform.retrieve import Encoder, EviReformRetriever, _Work


def aspect_coverage(H: np.ndarray, starts: np.ndarray, pool: Sequence[int],
                    probes: np.ndarray) -> np.ndarray:
    """g (|P| × |A|): g[p, d] = max over d's propositions i of max(0, h_iᵀh_p); 0 for a
    passage without propositions. ``starts[j]:starts[j+1]`` are passage j's proposition rows."""
    g = np.zeros((probes.shape[0], len(pool)))
    for col, j in enumerate(pool):
        lo, hi = int(starts[j]), int(starts[j + 1])
        if hi > lo:
            g[:, col] = np.maximum((H[lo:hi] @ probes.T).max(axis=0), 0.0)
    return g


class HybridRetriever(EviReformRetriever):
    """EviReform Steps 1–7, then the coverage-aware order of the readout's top pool."""

    def __init__(self, index: EviReformIndex, params: EviReformParams,
                 llm: EviReformLLM | None, encode: Encoder) -> None:
        super().__init__(index, params, llm, encode)
        # propositions are stored by passage, so passage j owns rows starts[j]:starts[j+1]
        self.starts = np.searchsorted(index.owner, np.arange(index.n_passages + 1))

    def _final(self, work: _Work, scores: np.ndarray) -> tuple[list[int], list[float]]:
        p = self.params
        order = self._readout_order(work, scores, max(p.top_k, p.coverage_pool))
        pool = [int(j) for j in order[:p.coverage_pool]]
        probes = np.stack([work.h_q] + work.probe_vectors)
        g = aspect_coverage(self.index.H, self.starts, pool, probes)
        top = scores[pool].max() if pool else 0.0
        s = scores[pool] / top if top > 0 else np.zeros(len(pool))
        sel = greedy_select(s, g * (p.coverage_weight / probes.shape[0]), min(p.top_k, len(pool)))
        rows = [pool[i] for i in sel.order]
        utils = list(sel.utility)
        rest = [int(j) for j in order[p.coverage_pool:]][:p.top_k - len(rows)]
        floor = min(utils) if utils else 0.0
        # passages below the pool keep readout order with scores under the last pick
        tail = [floor - 1.0 - r for r in range(len(rest))]
        work.trace["coverage_pool"] = len(pool)
        work.trace["coverage_aspects"] = int(probes.shape[0])
        return rows + rest, utils + tail


def make_retriever(index: EviReformIndex, params: EviReformParams, llm: EviReformLLM | None,
                   encode: Encoder) -> EviReformRetriever:
    """The retriever ``params`` asks for: :class:`HybridRetriever` when ``final: coverage``."""
    cls = HybridRetriever if params.final == "coverage" else EviReformRetriever
    return cls(index, params, llm, encode)
