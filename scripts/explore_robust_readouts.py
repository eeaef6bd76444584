"""Two readouts tried on top of EviReform ``robust`` (issue 38), on the tuning sample only.

``robust`` ranks passages by the Eq. 15 readout of z (backstop, backfill, one propagation
step). This script replays ``robust`` on a tuning dataset (LLM answers from the cache, 0
model calls with ``EVICHAIN_LLM_REPLAY=1``) and re-ranks each question's passages with:

* **PPR readout** (the graph walk that HippoRAG 2 / PropRAG use, on EviReform's own index):
  the undirected passage–entity graph B_jе = 1[a proposition of passage j mentions e];
  reset = ω·(Aᵀs′)/‖Aᵀs′‖₁ on entities and score/‖score‖₁ on passages (s′ = s + ε û,
  score = the Eq. 15 readout); p = PPR(reset, damping d) by power iteration; final =
  γ·score/max(score) + p_passages/max(p_passages), for d ∈ {0.3, 0.5, 0.7, 0.85},
  ω ∈ {0, 1}, γ ∈ {0, 0.5, 1}.
* **dense passage prior**: final = score/max(score) + γ_q·mm(D h_q)⁴ + γ_r·mm(max_ρ D h_ρ)⁴,
  D = the MiniLM passage vectors, mm = min–max over the corpus, ρ = robust's residual queries.

For reference the table ends with PropRAG (LLM-free, ``retrieve_graph``'s code) on the same
questions. Ranks are cut at 20; passages after the last positive final score follow robust's tail order
(best proposition similarity). Per-question metrics are :mod:`evichain.metrics.retrieval`'s.

Run (after ``dvc repro canonicalize_entities@2wiki_tune_s`` and ``evichain cache import
reproduce/2wiki_tune_s-llm-cache.sqlite``)::

    EVICHAIN_LLM_REPLAY=1 python scripts/explore_robust_readouts.py [--dataset 2wiki_tune_s]

Writes ``scripts/explore_robust_readouts.results.md``. Refuses a dataset outside
``tuning_datasets`` (the reported samples are never looked at here).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from prefect import flow  # noqa: E402

from evichain.config import Params, load_params  # noqa: E402
from evichain.embed import get_embedder  # noqa: E402
from evichain.io import write_text  # noqa: E402
from evichain.llm import LLMClient  # noqa: E402
from evichain.methods.evireform.index import EviReformIndex  # noqa: E402
from evichain.methods.evireform.llm_steps import EviReformLLM  # noqa: E402
from evichain.methods.evireform.readout import passage_best, rank_with_tail  # noqa: E402
from evichain.methods.evireform.retrieve import EviReformRetriever, _Work, backstop  # noqa: E402
from evichain.methods.evireform.variants import variant_params  # noqa: E402
from evichain.methods.graph.graph import min_max  # noqa: E402
from evichain.methods.graph.ppr import ppr_power, transition  # noqa: E402
from evichain.metrics.retrieval import per_question_metrics  # noqa: E402
from evichain.paths import DatasetPaths  # noqa: E402
from evichain.retrieval.run import run_table  # noqa: E402
from flows.evireform import load_index  # noqa: E402

METRICS = ("Recall@5", "Chain@5", "Recall@10")
OUT = Path(__file__).with_suffix(".results.md")
Readout = Callable[["Stored"], np.ndarray]


@dataclass(frozen=True)
class Stored:
    """One question after robust's Steps 1–7: s′, the Eq. 15 readout, the tail order (each
    passage's best proposition similarity to q) and the residual queries."""

    qid: str
    s: np.ndarray
    score: np.ndarray
    tail: np.ndarray
    queries: list[str]


@dataclass(frozen=True)
class Replayed:
    """robust replayed on a tuning dataset, and what the readouts need besides."""

    index: EviReformIndex
    questions: pd.DataFrame
    stored: list[Stored]
    Q: np.ndarray
    encode: Callable[[list[str]], np.ndarray]
    usage: dict[str, Any]


class Recording(EviReformRetriever):
    """``robust`` unchanged; keeps s′ (as ``_rank`` forms it), the Eq. 15 readout and the tail
    order of each question in its trace."""

    def _final(self, work: _Work, scores: np.ndarray) -> tuple[list[int], list[float]]:
        assert work.s is not None
        work.trace["_s"] = work.s + self.params.backstop_eps * backstop(work.u, work.candidates)
        work.trace["_score"] = scores
        work.trace["_tail"] = passage_best(work.u, self.index.owner, self.index.n_passages)
        return super()._final(work, scores)


def passage_entity_graph(index: EviReformIndex) -> sp.csr_matrix:
    """Symmetric W over [entities; passages] with B_je = 1[passage j mentions entity e]."""
    n_props = len(index.owner)
    owner = sp.csr_matrix((np.ones(n_props), (index.owner, np.arange(n_props))),
                          shape=(index.n_passages, n_props))
    B = (owner @ index.A).tocsr()
    B.data[:] = 1.0
    return sp.bmat([[None, B.T], [B, None]]).tocsr()


def unit_max(x: np.ndarray) -> np.ndarray:
    """x / max(x), zero when max(x) ≤ 0."""
    top = x.max() if x.size else 0.0
    return x / top if top > 0 else np.zeros_like(x)


def ppr_readout(index: EviReformIndex, W: sp.csr_matrix, d: float, omega: float,
                gamma: float) -> Readout:
    """γ·score/max + PPR passages/max, reset = ω·entity mass of s′ and the readout (docstring)."""
    PT = transition(W)
    n_e = index.A.shape[1]

    def readout(q: Stored) -> np.ndarray:
        ent = index.A.T @ q.s
        ent = ent / ent.sum() if ent.sum() > 0 else ent
        pas = q.score / q.score.sum() if q.score.sum() > 0 else q.score
        p = ppr_power(W, np.concatenate([omega * ent, pas]), d, 1e-8, 200, PT)[n_e:]
        return gamma * unit_max(q.score) + unit_max(p)
    return readout


def dense_readout(D: np.ndarray, q_vecs: dict[str, np.ndarray], r_vecs: dict[str, np.ndarray | None],
                  gq: float, gr: float) -> Readout:
    """score/max + γ_q·mm(D h_q)⁴ + γ_r·mm(max_ρ D h_ρ)⁴ (docstring)."""
    def readout(q: Stored) -> np.ndarray:
        out = unit_max(q.score) + gq * min_max(D @ q_vecs[q.qid]) ** 4
        r = r_vecs[q.qid]
        return out + (gr * min_max(r) ** 4 if r is not None else 0.0)
    return readout


def evaluate(index: EviReformIndex, questions: pd.DataFrame, stored: list[Stored],
             readout: Readout) -> tuple[dict[str, float], float]:
    """Mean metrics (×100) of the re-ranked runs, and the readout's mean ms per question."""
    rows: list[tuple[str, int, str, float]] = []
    spent = 0.0
    for q in stored:
        start = time.perf_counter()
        final = readout(q)
        spent += time.perf_counter() - start
        top = rank_with_tail(final, q.tail, 20)
        rows += [(q.qid, r + 1, str(index.passage_ids[j]), float(final[j])) for r, j in enumerate(top)]
    pq = per_question_metrics(run_table(rows), questions)
    return {m: round(100 * float(pq[m].mean()), 2) for m in METRICS}, 1000 * spent / len(stored)


@flow(name="explore-robust-readouts")
def replay(P: Params, dataset: str) -> Replayed:
    """robust on ``dataset`` from the LLM cache (one question at a time)."""
    params = variant_params(P.evireform, "robust")
    index, questions, Q = load_index(DatasetPaths(dataset), params, P.embed, P.orchestration)
    client = LLMClient(P.llm, stage="explore_robust_readouts")
    encode = get_embedder(P.embed).encode
    ret = Recording(index, params, EviReformLLM(client, params), encode)
    stored = []
    for n, (qid, text) in enumerate(zip(questions["question_id"], questions["question"])):
        t = ret.retrieve(qid, text, Q[n]).trace
        stored.append(Stored(qid, t.pop("_s"), t.pop("_score"), t.pop("_tail"),
                             list(t.get("residual_queries") or [])))
    return Replayed(index, questions, stored, Q, encode, client.usage.as_dict())


def proprag_reference(P: Params, dataset: str, questions: pd.DataFrame) -> dict[str, float]:
    """PropRAG (flows.graph, params.graph) on ``dataset``'s questions: mean metrics ×100."""
    from flows.graph import run_method

    out = run_method(DatasetPaths(dataset), "proprag", "", P, stage="explore_robust_readouts")
    pq = per_question_metrics(out.run, questions)
    return {m: round(100 * float(pq[m].mean()), 2) for m in METRICS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="2wiki_tune_s")
    args = ap.parse_args()
    P = load_params("params.yaml")
    if args.dataset not in P.tuning_datasets:
        raise SystemExit(f"{args.dataset!r} is not in tuning_datasets {P.tuning_datasets}")
    run = replay(P, args.dataset)
    index, questions, stored, Q, encode, usage = (run.index, run.questions, run.stored, run.Q,
                                                  run.encode, run.usage)
    rows: list[dict[str, Any]] = []
    base, ms = evaluate(index, questions, stored, lambda q: q.score)
    rows.append({"readout": "robust (Eq. 15)", **base, "ms/q": ms})
    W = passage_entity_graph(index)
    for d, omega, gamma in itertools.product([0.3, 0.5, 0.7, 0.85], [0.0, 1.0], [0.0, 0.5, 1.0]):
        res, ms = evaluate(index, questions, stored, ppr_readout(index, W, d, omega, gamma))
        rows.append({"readout": f"PPR d={d} ω={omega} γ={gamma}", **res, "ms/q": ms})
    D = encode(list(index.passage_texts))
    q_vecs = {qid: Q[n] for n, qid in enumerate(questions["question_id"])}
    r_vecs = {q.qid: ((D @ encode(q.queries).T).max(axis=1) if q.queries else None) for q in stored}
    for gq, gr in itertools.product([0.1, 0.25, 0.5, 1.0], [0.0, 0.1, 0.25, 0.5]):
        res, ms = evaluate(index, questions, stored, dense_readout(D, q_vecs, r_vecs, gq, gr))
        rows.append({"readout": f"dense prior γ_q={gq} γ_r={gr}", **res, "ms/q": ms})
    rows.append({"readout": "PropRAG (reference, LLM-free)", **proprag_reference(P, args.dataset, questions),
                 "ms/q": float("nan")})
    table = pd.DataFrame(rows)
    table["ms/q"] = table["ms/q"].round(1)
    text = (f"# Readouts on top of EviReform robust: {args.dataset} ({len(stored)} questions)\n\n"
            f"`EVICHAIN_LLM_REPLAY=1 python scripts/explore_robust_readouts.py --dataset {args.dataset}`; "
            f"LLM calls: {usage.get('calls', 0)} (cache hits {usage.get('cache_hits', 0)}). "
            "ms/q = the re-ranking alone (robust's Steps 1–7 excluded), wall time on this 2-core "
            "machine; it moves with the load on the cores.\n\n"
            + table.to_markdown(index=False) + "\n")
    write_text(text, OUT)
    print(text)


if __name__ == "__main__":
    main()
