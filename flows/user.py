"""``evichain run``: one registered method on a user's own corpus and questions, end to end.

1. Read and validate the JSONL files (:mod:`evichain.data.user`) and write the two tables
   under ``<out>/artifacts/<name>/`` (the layout of every benchmark dataset).
2. Build the index tables the method reads (:meth:`evichain.methods.base.Method.tables`) with
   the same flows the index stages run (checkpoints, retries, progress): proposition
   extraction + entity canonicalisation, HippoRAG's OpenIE, or CEE's facets.
3. Build the method from the registry and retrieve every question as a Prefect task.
4. Write ``<out>/<label>.parquet`` (run rows in the user's passage ids), ``<label>.trec`` (TREC
   run format), ``<label>-trace.parquet`` and, with gold passages, ``<label>-per_question.parquet``
   and ``<label>-metrics.json`` (the evaluate stage's metrics, ``evaluate.ks``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from prefect import flow

from evichain.config import OrchestrationParams, Params
from evichain.data.user import UserDataset
from evichain.io import read_parquet, write_json, write_parquet, write_text
from evichain.methods.base import (PROPOSITION_TABLES, BuildContext, Method, QuestionResult,
                                   Retriever, run_frame)
from evichain.metrics.retrieval import aggregate, per_question_metrics
from evichain.paths import DatasetPaths
from flows.common import with_runner
from flows.questions import retrieve_questions


@dataclass
class UserRunOutput:
    """What :func:`run_user` wrote, and the means when gold passages were given."""

    files: dict[str, Path]
    metrics: dict[str, float] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)


def write_dataset(data: UserDataset, paths: DatasetPaths) -> None:
    """The user's tables (and the id map) where the index flows look for them."""
    write_parquet(data.corpus, paths.corpus)
    write_parquet(data.questions, paths.questions)
    write_parquet(data.id_map, paths.dir / "id_map.parquet")


def proposition_tables(paths: DatasetPaths, params: Params, name: str) -> dict[str, pd.DataFrame]:
    """EviReform's index tables: the extraction flow (``evireform.index``), then canonicalisation."""
    from evichain.methods.evireform.canonicalize import canonicalize
    from flows.evireform import run_extraction

    index = params.evireform.index.for_dataset(name)
    out = run_extraction(paths, index, params.llm, orch=params.orchestration)
    titles = read_parquet(paths.corpus)["title"].tolist()
    entities, incidence = canonicalize(out.propositions, titles, index.fuzzy_threshold,
                                       index.fuzzy_min_chars)
    tables = {"propositions": out.propositions, "entities": entities, "incidence": incidence}
    for key, table in tables.items():
        write_parquet(table, paths.index_file(f"{key}.parquet"))
    return tables


def triples_table(paths: DatasetPaths, params: Params, name: str) -> pd.DataFrame:
    """HippoRAG 2's OpenIE triples (``graph.openie``), as ``extract_triples`` builds them."""
    from flows.graph import run_extraction

    out = run_extraction(paths, params.graph, params.graph.openie_for(name), params.llm,
                         orch=params.orchestration)
    write_parquet(out.triples, paths.index_file("triples.parquet"))
    return out.triples


def facets_table(paths: DatasetPaths, params: Params, variant: str) -> pd.DataFrame:
    """CEE's LLM facet table for ``variant``'s facet settings, as ``generate_facets`` builds it."""
    from evichain.methods.cee.params import variant_params
    from flows.cee import run_facets

    cee = variant_params(params.cee, variant)
    out = run_facets(paths, cee, params.llm, params.embed, orch=params.orchestration)
    write_parquet(out.facets, paths.dir / "facets.parquet")
    return out.facets


def index_tables(method: Method, variant: str, params: Params, paths: DatasetPaths
                 ) -> dict[str, pd.DataFrame]:
    """Every table ``method`` (``variant``) reads, built by its index flow."""
    needed = set(method.tables(params, variant))
    tables: dict[str, pd.DataFrame] = {}
    if needed & set(PROPOSITION_TABLES):
        tables.update(proposition_tables(paths, params, paths.dataset))
    if "triples" in needed:
        tables["triples"] = triples_table(paths, params, paths.dataset)
    if "facets" in needed:
        tables["facets"] = facets_table(paths, params, variant)
    return tables


@flow(name="user-retrieve", log_prints=True)
def retrieval_flow(retriever: Retriever, questions: pd.DataFrame, label: str,
                   orch: OrchestrationParams) -> list[QuestionResult]:
    """Every question as a task, results in question order."""
    return retrieve_questions(retriever, questions["question_id"], questions["question"], orch, label)


def trec_lines(run: pd.DataFrame, tag: str) -> str:
    """TREC run format: ``qid Q0 docid rank score tag``."""
    return "".join(f"{q} Q0 {p} {r} {s:.6f} {tag}\n" for q, r, p, s in
                   zip(run["question_id"], run["rank"], run["passage_id"], run["score"]))


def run_user(data: UserDataset, method: Method, variant: str, params: Params, out_dir: Path,
             name: str = "user") -> UserRunOutput:
    """Steps 1-4 of the module docstring; returns the written files and the metric means."""
    paths = DatasetPaths(name, root=Path(out_dir) / "artifacts")
    write_dataset(data, paths)
    corpus = data.corpus
    tables = index_tables(method, variant, params, paths)
    gold = {q: list(g) for q, g in zip(data.questions["question_id"],
                                       data.questions["gold_passage_ids"])}
    ctx = BuildContext(corpus=corpus, params=params, tables=tables, gold=gold)
    retriever = method.build(ctx, variant)
    label = method.name if variant in (None, "default") else f"{method.name}-{variant}"
    results = with_runner(retrieval_flow, params.orchestration)(retriever, data.questions, label,
                                                                 params.orchestration)
    run = run_frame(results)
    user_run = data.to_user_ids(run)
    out = Path(out_dir)
    files = {"run": out / f"{label}.parquet", "trec": out / f"{label}.trec",
             "trace": out / f"{label}-trace.parquet"}
    write_parquet(user_run, files["run"])
    write_text(trec_lines(user_run, label), files["trec"])
    write_parquet(pd.DataFrame([r.trace for r in results]), files["trace"])
    metrics: dict[str, Any] = {}
    if data.has_gold:
        per_q = per_question_metrics(run, data.questions, params.evaluate.ks)
        metrics = aggregate(per_q)
        files["per_question"] = out / f"{label}-per_question.parquet"
        files["metrics"] = out / f"{label}-metrics.json"
        write_parquet(per_q, files["per_question"])
        write_json({"method": label, **metrics}, files["metrics"])
    tokens = {k: sum(r.usage[k] for r in results) for k in ("prompt_tokens", "completion_tokens")}
    return UserRunOutput(files, metrics, tokens)
