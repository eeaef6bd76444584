#!/usr/bin/env python
"""Throughput of the offline model per prompt kind, old server vs llama-server (issue 62).

Both backends (``llama-cpp-python``: one request at a time; ``llama-server``: parallel slots,
continuous batching) are started the way the pipeline starts them (``llm.model: local/...``,
``llm.local.backend``) and stay up; for each prompt kind and each concurrency ``c`` each backend
in turn gets the same ``max(--calls, c)`` distinct requests from ``c`` threads through the
project's :class:`~evichain.llm.client.LLMClient` (its real prompt, schema constraint, retries and
validation; a fresh empty cache, so every request reaches the model):

* ``extraction``: EviReform Listing 11 on a MuSiQue passage;
* ``ner`` / ``triples``: HippoRAG 2's OpenIE steps on a passage (triples get the NER output);
* ``facet_pair``: CEE's facet prompt for (passage, its dense nearest neighbour);
* ``selection``: EviReform Listing 12 over the question's top ``n_candidates`` BM25 sentences;
* ``reader``: the shared reader over the question's top 5 BM25 passages.

Per cell it records calls/min, prompt tok/s, generated tok/s (both from the usage the server
reports, over the cell's wall time) and the share of schema-valid answers. Inputs are MuSiQue
passages and questions (``artifacts/musique``), different for every cell; the same inputs go to
both backends. Results: ``benchmarks/results/llm_throughput.{json,md}``.

    .venv/bin/python -m benchmarks.bench_llm_throughput            # hours on 2 slow cores
    .venv/bin/python -m benchmarks.bench_llm_throughput --kinds extraction --concurrency 1 4
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bm25s
import polars as pl

from benchmarks.bench_local_llm import cpu_busy
from evichain.config import load_params
from evichain.llm.cache import LLMCache
from evichain.llm.client import LLMClient
from evichain.llm.local_server import stop_shared_servers
from evichain.llm.params import LLMParams
from evichain.llm.types import LLMSuccess, quote_json
from evichain.methods.cee.facets import FacetPair, Passage, generate_pair_facets
from evichain.methods.evireform.llm_steps import EviReformLLM
from evichain.methods.graph.openie import clean_entities, triples_check
from evichain.methods.graph.prompts import ner_prompt, triples_prompt
from evichain.qa.reader import read_one

KINDS = ("extraction", "ner", "triples", "facet_pair", "selection", "reader")
BACKENDS = ("llama-cpp-python", "llama-server")
RESULTS = Path("benchmarks/results")


@dataclass
class Inputs:
    """MuSiQue passages (id, title, text) and questions with their BM25 top passages/sentences."""

    passages: list[tuple[str, str, str]]
    questions: list[str]
    top_passages: list[list[dict[str, str]]]
    top_sentences: list[list[str]]


def load_inputs(n_candidates: int, limit: int = 200) -> Inputs:
    """The first ``limit`` MuSiQue passages over 40 words and every question, with BM25 tops."""
    corpus = pl.read_parquet("artifacts/musique/corpus.parquet")
    questions = pl.read_parquet("artifacts/musique/questions.parquet")["question"].to_list()
    rows = [r for r in corpus.select("passage_id", "title", "text").iter_rows()
            if len(r[2].split()) > 40][:limit]
    sentences = pl.read_parquet("artifacts/musique/index/propositions.parquet")["text"].to_list()
    p_texts = [f"{t}\n{x}" for _, t, x in corpus.select("passage_id", "title", "text").iter_rows()]
    p_index, s_index = bm25s.BM25(), bm25s.BM25()
    p_index.index(bm25s.tokenize(p_texts, show_progress=False), show_progress=False)
    s_index.index(bm25s.tokenize(sentences, show_progress=False), show_progress=False)
    q_tokens = bm25s.tokenize(questions, show_progress=False)
    p_top, _ = p_index.retrieve(q_tokens, k=5, show_progress=False)
    s_top, _ = s_index.retrieve(q_tokens, k=n_candidates, show_progress=False)
    all_rows = corpus.select("title", "text").rows()
    tops = [[{"title": all_rows[i][0], "text": all_rows[i][1]} for i in idx] for idx in p_top]
    return Inputs(rows, questions, tops, [[sentences[i] for i in idx] for idx in s_top])


def make_call(kind: str, inputs: Inputs, params: Any) -> Callable[[LLMClient, int], bool]:
    """``call(client, i)`` for the i-th input of ``kind``; True when the answer is schema-valid."""
    ps = inputs.passages
    if kind == "extraction":
        from evichain.methods.evireform.extract import llm_propositions
        return lambda c, i: llm_propositions(c, ps[i][0], ps[i][2]).status["status"] == "ok"
    if kind == "ner":
        return lambda c, i: isinstance(c.call(ner_prompt(), data=quote_json(ps[i][2])), LLMSuccess)
    if kind == "triples":
        def triples(c: LLMClient, i: int) -> bool:
            ner = c.call(ner_prompt(), data=quote_json(ps[i][2]))
            ents = clean_entities(ner.value.named_entities) if isinstance(ner, LLMSuccess) else []
            return isinstance(c.call(triples_prompt(), check=triples_check,
                                     data={"paragraph": ps[i][2], "named_entities": ents}), LLMSuccess)
        return triples
    if kind == "facet_pair":
        def facet(c: LLMClient, i: int) -> bool:
            (a, ta, xa), (b, tb, xb) = ps[i], ps[(i + 1) % len(ps)]
            out = generate_pair_facets(c, FacetPair(a, b, 1, 0.0), Passage(a, ta, xa),
                                       Passage(b, tb, xb), params.cee.facets)
            return out.status["status"] == "ok"
        return facet
    if kind == "selection":
        def select(c: LLMClient, i: int) -> bool:
            q = i % len(inputs.questions)
            _, usage = EviReformLLM(c, params.evireform).select(
                inputs.questions[q], list(enumerate(inputs.top_sentences[q])))
            return usage.ok
        return select
    if kind == "reader":
        return lambda c, i: read_one(c, inputs.questions[i % len(inputs.questions)],
                                     inputs.top_passages[i % len(inputs.questions)])["status"] == "ok"
    raise ValueError(f"unknown kind {kind!r}; choose from {KINDS}")


def run_cell(llm: LLMParams, call: Callable[[LLMClient, int], bool], offset: int, n: int,
             concurrency: int, cache_dir: Path) -> dict[str, Any]:
    """``n`` requests (inputs ``offset`` ...) from ``concurrency`` threads; the cell's rates.

    ``triples`` counts its NER call too (one request = NER + triples), as the index step does."""
    client = LLMClient(llm.model_copy(update={"concurrency": concurrency}), stage="bench",
                       cache=LLMCache(cache_dir / f"cell-{time.monotonic_ns()}.sqlite"))
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        valid = list(pool.map(lambda i: call(client, i), range(offset, offset + n)))
    wall = time.perf_counter() - t0
    u = client.usage
    return {"calls": n, "model_calls": u.calls, "wall_s": round(wall, 2),
            "calls_per_min": round(60 * n / wall, 2),
            "prompt_tok_s": round(u.prompt_tokens / wall, 1),
            "gen_tok_s": round(u.completion_tokens / wall, 1),
            "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
            "valid_rate": round(sum(valid) / n, 3), "repairs": u.repairs, "failures": u.failures}


def backend_params(params: Any, backend: str, parallel: int) -> LLMParams:
    """``llm`` params with ``llm.local.backend`` = ``backend`` (``parallel`` llama-server slots)."""
    return params.llm.model_copy(update={"local": params.llm.local.model_copy(
        update={"backend": backend, "parallel": parallel})})


def run_cells(args: argparse.Namespace, inputs: Inputs, params: Any,
              cache_dir: Path) -> list[dict[str, Any]]:
    """Every (kind, concurrency) cell, the backends interleaved cell by cell (both servers stay
    up, idle between their cells), so both meet the same machine state and the same inputs."""
    llms = {b: backend_params(params, b, args.parallel) for b in args.backends}
    rows: list[dict[str, Any]] = []
    try:
        for kind in args.kinds:
            call, offset = make_call(kind, inputs, params), 0
            for c in args.concurrency:
                n = max(args.calls, c)
                for backend, llm in llms.items():
                    busy = cpu_busy()
                    busy = None if busy is None else round(busy, 3)
                    cell = run_cell(llm, call, offset, n, c, cache_dir)
                    rows.append({"backend": backend, "kind": kind, "concurrency": c,
                                 "others_busy_before": busy, **cell})
                    print(json.dumps(rows[-1]), flush=True)
                offset += n
    finally:
        stop_shared_servers()
    return rows


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The results table, with the llama-server / old ratio of each cell."""
    old = {(r["kind"], r["concurrency"]): r for r in rows if r["backend"] == "llama-cpp-python"}
    lines = ["# Offline LLM throughput per prompt kind (`benchmarks/bench_llm_throughput.py`)", "",
             *[f"- {k}: {v}" for k, v in meta.items()], "",
             "| kind | c | backend | calls/min | prompt tok/s | gen tok/s | valid | wall s | "
             "× calls/min | × gen tok/s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        base = old.get((r["kind"], r["concurrency"]))
        ratio = (f"{r['calls_per_min'] / base['calls_per_min']:.2f} | "
                 f"{r['gen_tok_s'] / max(base['gen_tok_s'], 1e-9):.2f}"
                 if base and r["backend"] != "llama-cpp-python" else " | ")
        lines.append(f"| {r['kind']} | {r['concurrency']} | {r['backend']} | {r['calls_per_min']} | "
                     f"{r['prompt_tok_s']} | {r['gen_tok_s']} | {r['valid_rate']} | "
                     f"{r['wall_s']} | {ratio} |")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    ap.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    ap.add_argument("--concurrency", nargs="+", type=int, default=[1, 2, 4, 8])
    ap.add_argument("--calls", type=int, default=4, help="requests per cell (at least c)")
    ap.add_argument("--parallel", type=int, default=8, help="llama-server slots")
    ap.add_argument("--out", default="llm_throughput", help="results file stem")
    ap.add_argument("--run-date", help="with --from-lines: when the stopped run ran")
    ap.add_argument("--from-lines", type=Path, help="write the results from the JSON lines a "
                    "stopped run printed (its stdout) instead of running")
    ap.add_argument("--max-busy", type=float, default=0.1,
                    help="with --from-lines: leave out cells that began with other processes "
                         "using more than this share of the CPU")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    params = load_params(Path("params.yaml"))
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, no GPU",
            "model": params.llm.model, "threads": params.llm.local.n_threads,
            "llama-server slots": args.parallel, "requests per cell": f"max({args.calls}, c)",
            "command": "python -m benchmarks.bench_llm_throughput " + " ".join(argv or [])}
    if args.from_lines is not None:
        rows = [row for row in map(json.loads, filter(
            lambda line: line.startswith("{"), args.from_lines.read_text().splitlines()))
            if row["kind"] in args.kinds and row["concurrency"] in args.concurrency]
        dropped = [r for r in rows if (r["others_busy_before"] or 0.0) > args.max_busy]
        rows = [r for r in rows if r not in dropped]
        meta["command"] = (f"python -m benchmarks.bench_llm_throughput --calls {args.calls}, "
                           f"stopped; the rows it printed ({args.from_lines.name}) of kinds "
                           f"{', '.join(args.kinds)} written with --from-lines")
        meta["date"] = args.run_date or meta["date"]
        meta["left out"] = ", ".join(f"{r['kind']} c={r['concurrency']} {r['backend']} (others "
                                     f"busy {r['others_busy_before']})" for r in dropped) or "none"
    else:
        inputs = load_inputs(params.evireform.n_candidates)
        with tempfile.TemporaryDirectory() as tmp:
            rows = run_cells(args, inputs, params, Path(tmp))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (RESULTS / f"{args.out}.md").write_text(markdown(rows, meta))
    print(markdown(rows, meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
