"""One construction path (issue 60): every method's stage run comes from the registry
(:meth:`Method.build`) through the one per-question flow (:mod:`flows.method`), and gives the
run the family flows gave before they were deleted.

The demo dataset (converted from the bundled 2Wiki files), a sentence index, a dense run and
scripted LLM answers (:mod:`tests.fixtures.any_llm`); each run on an LLM cache of its own, all
on one embedding cache made for this module. Before the family retrieval flows were deleted (commit "One construction path"), every run
below was made by its family flow and by the registry on this project's machine: byte-identical
runs, equal traces, evidence and summaries. ``one_path_runs.json`` holds, for each run, what the
family flows of that commit gave with these settings (one worker): ``family_parquet_sha256``
(the sorted run's Parquet bytes) and ``ranking_sha256`` (the run as text: question, rank,
passage, score to 6 decimals), both made in a fresh process; this test checks the registry's
run against ``ids_sha256`` (question, rank, passage: exact) and ``scores`` (within 1e-5). Scores,
not bytes: within a longer test session the embedder's vectors move in the 7th decimal (seen:
at most 1.2e-7 on CEE's and HyDE's scores, same rankings), float noise of the process state.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from evichain.config import Params, load_params
from evichain.io import write_parquet
from evichain.llm.scripted import set_responder
from evichain.paths import DatasetPaths
from tests.fixtures.any_llm import respond

ROOT = Path(__file__).resolve().parents[2]
RECORDED = Path(__file__).with_name("one_path_runs.json")

RUNS: list[tuple[str, str | None]] = [
    *[("evireform", v) for v in ("base", "full", "prop_only", "reform_only", "residual_only",
                                 "repeat_question", "robust", "hybrid", "reorder", "rounds3")],
    *[("cee", v) for v in ("full", "no_coverage", "no_contrastive", "no_sequential", "robust")],
    ("hipporag2", None), ("catrag", None), ("proprag", None),
    ("hyde", None), ("query2doc", None), ("lamer", None),
    ("ircot", None), ("self_ask", None), ("s2g_rag", None), ("gear", None),
    ("listwise", None),
]
"""Every LLM method and variant the stages run."""


def demo_params() -> Params:
    """params.yaml with the scripted model, one worker and the LLM-free OpenIE. One worker: the
    embedding cache then fills in the same order on every run (with several, which question's
    task first encodes a text shared by two questions decides that text's batch, and a batch
    moves embeddings in the 7th decimal)."""
    params = load_params(ROOT / "params.yaml")
    llm = params.llm.model_copy(update={"model": "scripted/one-path", "backoff_base_s": 0.0})
    orch = params.orchestration.model_copy(update={"max_workers": 1})
    graph = params.graph.model_copy(update={"openie": "propositions"})
    return params.model_copy(update={"llm": llm, "orchestration": orch, "graph": graph})


def build_demo(paths: DatasetPaths, params: Params) -> None:
    """Corpus, questions, the sentence index, LLM-free triples, the dense run and LLM facets."""
    from evichain.data.prepare import prepare_dataset
    from evichain.data.schema import as_pandas
    from evichain.methods.evireform.canonicalize import canonicalize
    from evichain.methods.evireform.extract import TitleMatcher, sentence_propositions
    from evichain.methods.graph.openie import TRIPLE_COLUMNS, proposition_triples
    from flows.cee import run_facets
    from flows.method import run_method

    corpus_table, questions = prepare_dataset("demo", ROOT / "data", params.data)
    write_parquet(corpus_table, paths.corpus)
    write_parquet(questions, paths.questions)
    corpus = as_pandas(corpus_table)  # the index builders below take pandas
    index = params.evireform.index
    matcher = TitleMatcher(corpus["title"])
    props = pd.DataFrame([r for pid, t, x in zip(corpus["passage_id"], corpus["title"], corpus["text"])
                          for r in sentence_propositions(pid, t, x, matcher, index)])
    entities, incidence = canonicalize(props, corpus["title"].tolist(), index.fuzzy_threshold,
                                       index.fuzzy_min_chars)
    triples = pd.DataFrame([t for o in proposition_triples(corpus, props, entities, incidence)
                            for t in o.triples], columns=TRIPLE_COLUMNS)
    for name, table in (("propositions", props), ("entities", entities), ("incidence", incidence),
                        ("triples", triples)):
        write_parquet(table, paths.index_file(f"{name}.parquet"))
    dense = run_method(paths, "dense", None, params, stage="t-dense").run
    write_parquet(dense.sort_values(["question_id", "rank"]).reset_index(drop=True), paths.run("dense"))
    facets = run_facets(paths, params.cee, params.llm, params.embed, orch=params.orchestration,
                        root=paths.dir / "checkpoints")
    write_parquet(facets.facets, paths.dir / "facets.parquet")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[DatasetPaths, Params, Path]:
    from evichain.embed import encoder

    work = tmp_path_factory.mktemp("one-path")
    old = {k: os.environ.get(k) for k in ("EVICHAIN_EMBED_CACHE", "EVICHAIN_LLM_CACHE")}
    os.environ["EVICHAIN_EMBED_CACHE"] = str(work / "embed-build.sqlite")
    os.environ["EVICHAIN_LLM_CACHE"] = str(work / "llm-build.sqlite")
    # The embedder (and its cache file) is made once per process: an earlier test's embedder
    # would bring vectors encoded in other batches (float noise in the 7th decimal moves HyDE's
    # mean vector). A fresh one here, on this module's own cache, as the recording had.
    embedders = dict(encoder._EMBEDDERS)
    encoder._EMBEDDERS.clear()
    set_responder(respond)
    params = demo_params()
    paths = DatasetPaths("demo", root=work / "artifacts")
    build_demo(paths, params)
    yield paths, params, work
    encoder._EMBEDDERS.clear()
    encoder._EMBEDDERS.update(embedders)
    set_responder(None)
    for key, value in old.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def registry_run(paths: DatasetPaths, params: Params, work: Path, method: str,
                 variant: str | None, monkeypatch: pytest.MonkeyPatch) -> pd.DataFrame:
    """The run of the one flow, on an LLM cache of its own (the module's embedder and its
    embedding cache are shared, as in the recording)."""
    from flows.method import run_method

    monkeypatch.setenv("EVICHAIN_LLM_CACHE", str(work / f"llm-new-{method}-{variant}.sqlite"))
    set_responder(respond)
    out = run_method(paths, method, variant, params, stage=f"t-{method}")
    assert len(out.trace) == out.run["question_id"].nunique() > 0
    return out.run


@pytest.mark.parametrize(("method", "variant"), RUNS)
def test_registry_run_equals_the_recorded_family_run(demo: tuple[DatasetPaths, Params, Path],
                                                     method: str, variant: str | None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    paths, params, work = demo
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    key = method if variant is None else f"{method}-{variant}"
    run = registry_run(paths, params, work, method, variant, monkeypatch)
    ordered = run.sort_values(["question_id", "rank"], kind="stable")
    ids = "".join(f"{q}\t{r}\t{p}\n" for q, r, p in
                  zip(ordered["question_id"], ordered["rank"], ordered["passage_id"]))
    assert hashlib.sha256(ids.encode()).hexdigest() == recorded[key]["ids_sha256"]
    assert ordered["score"].tolist() == pytest.approx(recorded[key]["scores"], abs=1e-5)
