"""``evichain run``: one registered method on a user's own corpus and questions, end to end.

1. Read and validate the JSONL files (:mod:`evichain.data.user`) and write the two tables
   under ``<out>/artifacts/<name>/`` (the layout of every benchmark dataset).
2. Build the tables the method reads (:meth:`evichain.methods.base.Method.tables`) with the
   same flows the index stages run (checkpoints, retries, progress): proposition extraction +
   entity canonicalisation, HippoRAG's OpenIE, CEE's facets, or the dense run a reranker
   cuts its pools from.
3. Run the method through the one retrieval flow of ``dvc repro`` (:mod:`flows.method`):
   built from the registry, every question a Prefect task.
4. Write ``<out>/<label>.parquet`` (run rows in the user's passage ids), ``<label>.trec`` (TREC
   run format), ``<label>-trace.parquet`` and, with gold passages, ``<label>-per_question.parquet``
   and ``<label>-metrics.json`` (the evaluate stage's metrics, ``evaluate.ks``).

Between 4's run/trace files and its metrics, the stages' failure rule
(:func:`evichain.llm.failures.check_llm_failures`): above ``llm.max_failure_rate`` of failed
LLM requests or failed questions, :class:`~evichain.llm.failures.FailureRateExceeded` is raised
and no metrics are written, so a ranking made of fallbacks never passes for the method's. An
LLM method's counts (:func:`~evichain.llm.failures.llm_failure_counts`) go into its metrics.

Stopping: :mod:`flows.stopping` (``evichain run`` wraps steps 2-4 in its
:func:`~flows.stopping.interruptible`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from evichain.config import Params
from evichain.data.user import UserDataset
from evichain.io import read_table, write_json, write_parquet, write_text
from evichain.llm.failures import check_llm_failures, llm_failure_counts
from evichain.methods.base import PROPOSITION_TABLES, Method
from evichain.metrics.retrieval import EXCLUDED_ATTR, aggregate, per_question_frame
from evichain.paths import DatasetPaths
from flows.method import run_method


@dataclass
class UserRunOutput:
    """What :func:`run_user` wrote, the means when gold passages were given, the LLM tokens and
    (an LLM method's) failure counts."""

    files: dict[str, Path]
    metrics: dict[str, float] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)


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
    titles = read_table(paths.corpus, columns=["title"])["title"].to_list()
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


def first_stage_run(paths: DatasetPaths, params: Params, method: str) -> pd.DataFrame:
    """A first-stage run (``runs/<method>``) through the same flow, where a reranker reads it."""
    out = run_method(paths, method, None, params, stage=f"retrieve-{method}")
    write_parquet(out.run, paths.run(method))
    return out.run


def index_tables(method: Method, variant: str, params: Params, paths: DatasetPaths
                 ) -> dict[str, pd.DataFrame]:
    """Every table ``method`` (``variant``) reads, built by its index flow and written where the
    retrieval flow reads it."""
    needed = set(method.tables(params, variant))
    tables: dict[str, pd.DataFrame] = {}
    if needed & set(PROPOSITION_TABLES):
        tables.update(proposition_tables(paths, params, paths.dataset))
    if "triples" in needed:
        tables["triples"] = triples_table(paths, params, paths.dataset)
    if "facets" in needed:
        tables["facets"] = facets_table(paths, params, variant)
    for name in sorted(n for n in needed if n.startswith("runs/")):
        tables[name] = first_stage_run(paths, params, name.removeprefix("runs/"))
    return tables


def trec_lines(run: pd.DataFrame, tag: str) -> str:
    """TREC run format: ``qid Q0 docid rank score tag``."""
    return "".join(f"{q} Q0 {p} {r} {s:.6f} {tag}\n" for q, r, p, s in
                   zip(run["question_id"], run["rank"], run["passage_id"], run["score"]))


def run_user(data: UserDataset, method: Method, variant: str, params: Params, out_dir: Path,
             name: str = "user") -> UserRunOutput:
    """Steps 1-4 of the module docstring; returns the written files and the metric means."""
    paths = DatasetPaths(name, root=Path(out_dir) / "artifacts")
    write_dataset(data, paths)
    index_tables(method, variant, params, paths)
    label = method.label(variant)
    result = run_method(paths, method.name, variant, params, stage=f"run-{label}")
    run = result.run
    user_run = data.to_user_ids(run)
    out = Path(out_dir)
    files = {"run": out / f"{label}.parquet", "trec": out / f"{label}.trec",
             "trace": out / f"{label}-trace.parquet"}
    write_parquet(user_run, files["run"])
    write_text(trec_lines(user_run, label), files["trec"])
    write_parquet(result.trace, files["trace"])
    counts = llm_failure_counts(result.summary, result.trace)
    check_llm_failures(counts, params.llm.max_failure_rate, requests_see=files["trace"],
                       questions_see=files["trace"])  # written first, like the stages
    failures = counts if method.uses_llm else {}
    metrics: dict[str, Any] = {}
    if data.has_gold:
        per_q, excluded = per_question_frame(run, data.questions, params.evaluate.ks)
        metrics = aggregate(per_q, {EXCLUDED_ATTR: excluded})
        files["per_question"] = out / f"{label}-per_question.parquet"
        files["metrics"] = out / f"{label}-metrics.json"
        write_parquet(per_q, files["per_question"])
        write_json({"method": label, **metrics, **failures}, files["metrics"])
    return UserRunOutput(files, metrics, result.tokens, failures)
