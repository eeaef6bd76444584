"""Latency of CEE's online compute per question, excluding LLM calls and text encoding.

Measures :func:`evichain.methods.cee.retrieve.rank_pool` (Eq. 2–8: facet weights, refined
scores, greedy coverage-aware selection, final ranking) on synthetic L2-normalised embeddings,
and :func:`evichain.methods.cee.explore.retrieve_probes` (Eq. 1 retrieval of one round's probes
over a whole corpus). Sizes follow the paper's defaults: |P(q)| = 1 + 3 probes × T = 4 rounds
= 13, K_cand = 10 (so |A(q)| ≤ 130), 10 neighbours × 3 facets = 30 facets per passage,
K_final = 10; plus a larger pool and the ablation variants. Seeded; single process.

    .venv/bin/python -m benchmarks.bench_cee [--repeats 200] [--out benchmarks/bench_cee.results.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from evichain.methods.cee.explore import retrieve_probes
from evichain.methods.cee.params import CEEParams, variant_params
from evichain.methods.cee.retrieve import rank_pool
from evichain.methods.cee.scoring import FacetBank, refined_scores_explicit


def unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    a = rng.normal(size=(n, dim)).astype(np.float32)
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def timed(fn: Callable[[], object], repeats: int) -> dict[str, float]:
    """p50 / p95 / mean milliseconds over ``repeats`` calls (after one warm-up call)."""
    fn()
    ms = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - start) * 1000.0)
    arr = np.array(ms)
    return {"p50": float(np.percentile(arr, 50)), "p95": float(np.percentile(arr, 95)),
            "mean": float(arr.mean())}


def bench_rank(dim: int, n_probes: int, pool: int, facets: int, variant: str,
               repeats: int) -> dict[str, float]:
    rng = np.random.default_rng(202707)
    E = unit(rng, pool, dim)
    owner = np.repeat(np.arange(pool), facets)
    bank = FacetBank.build(owner, unit(rng, owner.size, dim), pool)
    P = unit(rng, n_probes, dim).astype(np.float64)
    params = variant_params(CEEParams(), variant)
    rows = list(range(pool))
    return timed(lambda: rank_pool(P, E, bank, rows, params), repeats)


def bench_explicit(dim: int, n_probes: int, pool: int, facets: int, repeats: int) -> dict[str, float]:
    """g via the literal Eq. 3–4 tensors (n_p × n_d × dim), the reference implementation."""
    rng = np.random.default_rng(202707)
    E = unit(rng, pool, dim).astype(np.float64)
    owner = np.repeat(np.arange(pool), facets)
    bank = FacetBank.build(owner, unit(rng, owner.size, dim), pool)
    P = unit(rng, n_probes, dim).astype(np.float64)
    F, mask = bank.gather(np.arange(pool))
    return timed(lambda: refined_scores_explicit(P, E, F, mask, 0.5), repeats)


def bench_retrieve(dim: int, n_passages: int, n_probes: int, repeats: int) -> dict[str, float]:
    rng = np.random.default_rng(202707)
    E = unit(rng, n_passages, dim)
    P = unit(rng, n_probes, dim)
    return timed(lambda: retrieve_probes(P, E, 10), repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    cases = [  # (dim, probes, pool, facets/passage, variant)
        (384, 13, 130, 30, "full"), (384, 13, 130, 0, "full"), (384, 13, 130, 30, "no_coverage"),
        (384, 13, 130, 30, "no_contrastive"), (384, 4, 40, 30, "no_sequential"),
        (768, 13, 130, 30, "full"), (1024, 13, 130, 30, "full"), (384, 25, 250, 30, "full"),
    ]
    lines = ["| dim | probes | pool | facets/passage | variant | p50 ms | p95 ms | mean ms |",
             "|---:|---:|---:|---:|---|---:|---:|---:|"]
    for dim, n_p, pool, nf, variant in cases:
        r = bench_rank(dim, n_p, pool, nf, variant, args.repeats)
        lines.append(f"| {dim} | {n_p} | {pool} | {nf} | {variant} | {r['p50']:.2f} | "
                     f"{r['p95']:.2f} | {r['mean']:.2f} |")
        print(lines[-1], flush=True)
    r = bench_explicit(384, 13, 130, 30, args.repeats)
    explicit = (f"For comparison, g(p, d) through the literal Eq. 3–4 tensors "
                f"(`refined_scores_explicit`, 384-d, 13 × 130 × 30): p50 {r['p50']:.2f} ms, "
                f"p95 {r['p95']:.2f} ms — `rank_pool` uses the algebraically identical Gram form "
                f"(`refined_scores`, equal to 1e-12 in tests/methods/cee/test_cee_equations.py).")
    print(explicit, flush=True)
    ret = ["| dim | corpus | probes | p50 ms | p95 ms | mean ms |", "|---:|---:|---:|---:|---:|---:|"]
    for dim, n, n_p in [(384, 6119, 4), (768, 6119, 4), (384, 50_000, 4)]:
        r = bench_retrieve(dim, n, n_p, max(10, args.repeats // 10))
        ret.append(f"| {dim} | {n} | {n_p} | {r['p50']:.2f} | {r['p95']:.2f} | {r['mean']:.2f} |")
        print(ret[-1], flush=True)
    text = "\n".join([
        "# CEE online compute latency (benchmarks/bench_cee.py)", "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
        f"(shared with other jobs while measured), numpy {np.__version__}, "
        f"{args.repeats} repeats per row (after one warm-up), seeded synthetic embeddings.", "",
        "## Scoring + selection per question (Eq. 2–8, `rank_pool`), excluding LLM calls", "",
        *lines, "",
        "13 probes = q + 3 probes × 4 rounds; pool 130 = 13 × K_cand 10 (upper bound, distinct); "
        "30 facets = 10 neighbours × 3 facets per pair (the defaults); `no_sequential` = round 1 "
        "only (q + 3 probes, ≤ 40 passages).", "", explicit, "",
        "## Probe retrieval per round (Eq. 1, `retrieve_probes`, 4 probes × whole corpus)", "",
        *ret, ""])
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
