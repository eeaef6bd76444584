"""Retrieval on Dask with 1 and 2 worker processes against the thread runner: BM25, dense and
PropRAG over every question of a dataset, through the one retrieval flow
(:func:`flows.method.run_method`, as ``dvc repro`` and ``evichain run`` call it).

The dataset's corpus and questions (``artifacts/<dataset>``, from ``prepare@<dataset>``) are
copied into a scratch directory, with PropRAG's LLM-free sentence index (sentence extractor and
canonicalisation, as ``test_one_path`` builds it) and an embedding cache of its own (or the
one ``--embed-cache`` names, kept for the next invocation). One
untimed thread run per method fills that cache, so every timed run reads the same vectors and
times retrieval, not first encoding. For each worker count a local Dask cluster of that many
single-threaded worker processes is started once and warmed by a flow whose tasks reach every
worker (each imports the flows and loads the embedder, and pays Prefect's first task in the
process; start and warm-up are timed apart, ``clusters``); the flows reach it by its
address, as ``orchestration.dask_address`` does; each run then builds the method on every
worker (a run's own key), so a timed run includes the workers' index builds. The thread runner
uses as many threads as the largest worker count. ``wall_s`` is the whole ``run_method`` call
(flow start, tables, the flow's index, fan-out); ``retrieval_s`` the summary's ``wall_s`` (the
fan-out alone); each the best of ``--repeats`` runs. Every Dask run's ranking is checked
against the thread run's (``same_ranking``).

Run: ``python -m benchmarks.dask_speedup --dataset demo`` (about 2 minutes here, mostly the two
clusters' start and warm-up), or on 2Wiki (962 questions, 6,119 passages) after
``dvc repro prepare@2wiki``:
``python -m benchmarks.dask_speedup --dataset 2wiki --embed-cache /tmp/dask-speedup-2wiki.sqlite``
(the first invocation encodes the passages and propositions once). Writes
``benchmarks/results/dask_speedup-<dataset>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")

import pandas as pd
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from evichain.config import EmbedParams, OrchestrationParams, Params, load_params
from evichain.io import read_parquet, write_parquet
from evichain.methods.evireform.canonicalize import canonicalize
from evichain.methods.evireform.extract import TitleMatcher, sentence_propositions
from evichain.paths import DatasetPaths

RESULTS = Path(__file__).parent / "results"
METHODS = ("bm25", "dense", "proprag")


def scratch_dataset(source: DatasetPaths, root: Path, params: Params) -> DatasetPaths:
    """``source``'s corpus and questions under ``root``, with the sentence index PropRAG reads
    (``propositions``, ``entities``, ``incidence``)."""
    for path in (source.corpus, source.questions):
        if not path.exists():
            raise FileNotFoundError(f"{path} missing: run `dvc repro prepare@{source.dataset}` first")
    paths = DatasetPaths(source.dataset, root=root)
    corpus = read_parquet(source.corpus)
    write_parquet(corpus, paths.corpus)
    shutil.copyfile(source.questions, paths.questions)
    index = params.evireform.index
    matcher = TitleMatcher(corpus["title"])
    props = pd.DataFrame([r for pid, t, x in zip(corpus["passage_id"], corpus["title"], corpus["text"])
                          for r in sentence_propositions(pid, t, x, matcher, index)])
    entities, incidence = canonicalize(props, corpus["title"].tolist(), index.fuzzy_threshold,
                                       index.fuzzy_min_chars)
    for name, table in (("propositions", props), ("entities", entities), ("incidence", incidence)):
        write_parquet(table, paths.index_file(f"{name}.parquet"))
    return paths


def ranking(run: pd.DataFrame) -> list[tuple[str, int, str]]:
    """A run as (question, rank, passage) rows in question and rank order."""
    ordered = run.sort_values(["question_id", "rank"], kind="stable")
    return list(zip(ordered["question_id"], ordered["rank"], ordered["passage_id"]))


def timed_runs(paths: DatasetPaths, method: str, params: Params, orch: OrchestrationParams,
               repeats: int, reference: pd.DataFrame | None) -> dict[str, Any]:
    """``repeats`` runs of ``method`` on the runner of ``orch``: the best ``wall_s`` and
    ``retrieval_s``, and whether every run ranks as ``reference`` does (when given)."""
    from flows.method import run_method

    chosen = params.model_copy(update={"orchestration": orch})
    walls, fanouts, same = [], [], True
    for _ in range(repeats):
        start = time.perf_counter()
        out = run_method(paths, method, None, chosen, stage=f"bench-{method}")
        walls.append(time.perf_counter() - start)
        fanouts.append(float(out.summary["wall_s"]))
        same = same and (reference is None or ranking(out.run) == ranking(reference))
    row: dict[str, Any] = {"wall_s": round(min(walls), 3), "retrieval_s": round(min(fanouts), 3)}
    if reference is not None:
        row["same_ranking"] = same
    return row


@task(cache_policy=NO_CACHE)
def warm_worker(embed: EmbedParams) -> int:
    """Import the flows and load the embedder in this (worker) process, as one Prefect task:
    what a worker's first task of a run would otherwise pay. Its process id."""
    import flows.method  # noqa: F401  (the flow modules and the method registry)
    from evichain.embed import get_embedder

    get_embedder(embed).encode(["warm-up"])
    time.sleep(0.5)  # the other workers take the other tasks
    return os.getpid()


@flow(name="dask-speedup-warm-up")
def warm_up(embed: EmbedParams, tasks: int) -> int:
    """``tasks`` :func:`warm_worker` tasks; the number of worker processes they reached."""
    return len({f.result() for f in [warm_worker.submit(embed) for _ in range(tasks)]})


@contextmanager
def local_cluster(n_workers: int, embed: EmbedParams) -> Iterator[tuple[str, dict[str, float]]]:
    """A local Dask cluster of ``n_workers`` single-threaded processes, every worker warmed by a
    flow of its own (:func:`warm_up`): its address and the seconds its start and warm-up took."""
    from distributed import LocalCluster

    from flows.common import with_runner

    start = time.perf_counter()
    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        started = time.perf_counter()
        orch = OrchestrationParams(task_runner="dask", dask_address=cluster.scheduler_address)
        reached = with_runner(warm_up, orch)(embed, 4 * n_workers)
        if reached != n_workers:
            raise RuntimeError(f"warm-up reached {reached} of {n_workers} workers")
        yield cluster.scheduler_address, {"start_s": round(started - start, 3),
                                          "warm_up_s": round(time.perf_counter() - started, 3)}


def measure(paths: DatasetPaths, params: Params, methods: list[str], workers: list[int],
            repeats: int) -> dict[str, Any]:
    """The thread runner's runs (after one untimed warm-up each), then each worker count's."""
    from flows.method import run_method

    threads = OrchestrationParams(task_runner="thread", max_workers=max(workers))
    reference: dict[str, pd.DataFrame] = {}
    results: dict[str, dict[str, Any]] = {m: {} for m in methods}
    for method in methods:
        warm = params.model_copy(update={"orchestration": threads})
        reference[method] = run_method(paths, method, None, warm, stage=f"bench-{method}").run
        results[method]["thread"] = timed_runs(paths, method, params, threads, repeats, None)
    clusters = {}
    for n in workers:
        with local_cluster(n, params.embed) as (address, timing):
            clusters[f"dask_{n}"] = timing
            orch = OrchestrationParams(task_runner="dask", dask_address=address)
            for method in methods:
                results[method][f"dask_{n}"] = timed_runs(paths, method, params, orch, repeats,
                                                         reference[method])
    for rows in results.values():
        if "dask_1" in rows and "dask_2" in rows:
            rows["speedup_2_vs_1"] = round(rows["dask_1"]["wall_s"] / rows["dask_2"]["wall_s"], 3)
    return {"clusters": clusters, "methods": results,
            "thread_max_workers": threads.max_workers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="demo", help="a prepared dataset under artifacts/")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per setting (best kept)")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--embed-cache", type=Path, default=None,
                        help="embedding cache to use and keep (default: a scratch one, removed)")
    args = parser.parse_args()
    params = load_params(args.params)
    source = DatasetPaths(args.dataset)
    with tempfile.TemporaryDirectory(prefix="dask-speedup-") as tmp:
        os.environ["EVICHAIN_EMBED_CACHE"] = str(args.embed_cache or Path(tmp) / "embed.sqlite")
        paths = scratch_dataset(source, Path(tmp) / "artifacts", params)
        corpus, questions = read_parquet(paths.corpus), read_parquet(paths.questions)
        measured = measure(paths, params, args.methods, sorted(set(args.workers)), args.repeats)
    out = {"dataset": args.dataset, "passages": len(corpus), "questions": len(questions),
           "repeats": args.repeats, "embed_model": params.embed.model,
           "machine": {"platform": platform.platform(), "python": platform.python_version(),
                       "cpus": os.cpu_count()},
           **measured}
    RESULTS.mkdir(parents=True, exist_ok=True)
    target = RESULTS / f"dask_speedup-{args.dataset}.json"
    target.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(out["methods"], indent=2))
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
