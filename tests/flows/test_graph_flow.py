"""End to end on a tiny corpus with the real MiniLM embedder and a scripted LLM: the EviReform
sentence index → LLM-free triples (extract_triples, ``propositions``) → retrieve_graph for
HippoRAG 2, CatRAG and PropRAG through the one retrieval flow (:mod:`flows.method`: run, trace,
summary with latency and LLM usage), a warm re-run without LLM calls, and the stage writing its
three outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from evichain.config import EmbedParams, LLMParams, OrchestrationParams, Params, parse_params
from evichain.io import read_json, read_parquet, write_parquet
from evichain.llm.scripted import set_responder
from evichain.methods.graph.params import GraphParams
from evichain.paths import DatasetPaths
from tests.fixtures.lothair import sentence_index

PASSAGES = [
    ("d0", "Lothair II", "Lothair II was the king of Lotharingia from 855 to 869. He was the son of "
                         "Emperor Lothair I and Ermengarde of Tours."),
    ("d1", "Ermengarde of Tours", "Ermengarde of Tours was the wife of Emperor Lothair I. She died on "
                                  "20 March 851 at the abbey of Erstein."),
    ("d2", "Teutberga", "Teutberga was a queen of Lotharingia by marriage to Lothair II."),
    ("d3", "Tours", "Tours is a city in the west of France on the Loire river."),
    ("d4", "Erstein", "Erstein is a commune in the Bas-Rhin department in Alsace in France."),
]
QUESTIONS = pd.DataFrame({"question_id": ["q1", "q2"],
                          "question": ["When did Lothair II's mother die?", "Where is Erstein?"],
                          "gold_passage_ids": [["d0", "d1"], ["d4"]]})


def respond(messages: list[dict], model: str) -> str:
    """A scripted model for every graph prompt (usable as ``EVICHAIN_SCRIPTED_LLM=
    tests.flows.test_graph_flow:respond``): capitalised words are the named entities, consecutive ones
    form triples; the filter keeps the first two facts; every edge scores 8."""
    system = messages[0]["content"]
    data = json.loads(next(m["content"] for m in messages if m["role"] == "user"))
    if system.startswith("You list the named entities of one paragraph"):
        return json.dumps({"named_entities": sorted({w.strip(".,") for w in data.split() if w[:1].isupper()})})
    if system.startswith("You turn one paragraph"):
        names = data["named_entities"] or ["paragraph"]
        pairs = list(zip(names, names[1:])) or [(names[0], names[0])]
        return json.dumps({"triples": [[a, "mentioned with", b] for a, b in pairs]})
    if system.startswith("You filter"):
        return json.dumps({"fact_ids": [f["id"] for f in data["facts"][:2]]})
    if system.startswith("You list the named entities of one question"):
        return json.dumps({"named_entities": [w for w in data.split() if w[:1].isupper()][:1]})
    if system.startswith("You score"):
        return json.dumps({"scores": [{"id": n["id"], "score": 8} for n in data["neighbours"]]})
    raise AssertionError(system[:50])


@pytest.fixture()
def paths(tmp_path: Path) -> DatasetPaths:
    corpus = pd.DataFrame(PASSAGES, columns=["passage_id", "title", "text"])
    props, entities, incidence = sentence_index(corpus)
    p = DatasetPaths("toy", root=tmp_path / "artifacts")
    write_parquet(corpus, p.corpus)
    write_parquet(QUESTIONS, p.questions)
    for name, table in (("propositions", props), ("entities", entities), ("incidence", incidence)):
        write_parquet(table, p.index_file(f"{name}.parquet"))
    return p


def test_llm_openie_with_the_scripted_model(paths: DatasetPaths, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.graph import extraction_flow

    monkeypatch.setenv("EVICHAIN_LLM_CACHE", str(tmp_path / "llm.sqlite"))
    set_responder(respond)
    llm = LLMParams(model="scripted/openie-flow", backoff_base_s=0.0)
    out = extraction_flow(paths, GraphParams(), "llm", llm, OrchestrationParams(max_workers=2),
                          root=tmp_path / "ckpt")
    assert out.summary["ok"] == 5 and out.summary["llm_usage"]["calls"] == 10
    assert set(out.triples["predicate"]) == {"mentioned with"}


def graph_params(graph: GraphParams, llm: LLMParams, orch: OrchestrationParams) -> Params:
    """The whole params of a graph run: ``graph``, ``llm`` and ``orchestration`` replaced."""
    return parse_params({}).model_copy(update={"graph": graph, "llm": llm, "embed": EmbedParams(),
                                               "orchestration": orch})


def test_three_methods_end_to_end(paths: DatasetPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.graph import extraction_flow
    from flows.method import retrieval_flow

    monkeypatch.setenv("EVICHAIN_LLM_CACHE", str(tmp_path / "llm.sqlite"))
    orch = OrchestrationParams(max_workers=2)
    llm = LLMParams(model="scripted/graph-flow", backoff_base_s=0.0, max_retries=0)
    params = GraphParams(top_k=4)
    triples = extraction_flow(paths, params, "propositions", llm, orch)
    assert triples.summary["triples"] > 0 and triples.summary["failed"] == 0
    write_parquet(triples.triples, paths.index_file("triples.parquet"))
    set_responder(respond)
    whole = graph_params(params, llm, orch)
    for method in ("hipporag2", "catrag", "proprag"):
        out = retrieval_flow(paths, method, None, whole, stage=f"t-{method}")
        assert out.run.groupby("question_id").size().tolist() == [4, 4]
        assert out.trace["question_id"].tolist() == ["q1", "q2"]
        assert {"status", "error_kind", "prompt_tokens", "completion_tokens", "fallback"} <= set(out.trace)
        s = out.summary
        assert s["method"] == method and s["questions"] == 2 and s["status"] == {"ok": 2}
        assert {"p50_ms", "p95_ms"} <= set(s["latency_compute"]) and s["index"]["passage_nodes"] == 5
        if method == "proprag":
            assert s["llm_usage"] == {"calls": 0} and (out.trace["prompt_tokens"] == 0).all()
        else:
            assert s["llm_usage"]["calls"] > 0 and (out.trace["prompt_tokens"] > 0).all()
            assert s["index"]["facts"] > 0
    q1 = out.run[out.run["question_id"] == "q1"]["passage_id"].tolist()
    assert "d0" in q1[:2] or "d1" in q1[:2]
    set_responder(lambda m, model: (_ for _ in ()).throw(AssertionError("no call expected")))
    warm = retrieval_flow(paths, "catrag", None, whole, stage="t-catrag-warm")
    assert warm.summary["llm_usage"]["calls"] == 0 and warm.summary["llm_usage"]["cache_hits"] > 0


def test_stage_writes_run_trace_and_usage(paths: DatasetPaths, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.method import run_method
    from stages._common import write_method_outputs

    monkeypatch.chdir(tmp_path)
    params = graph_params(GraphParams(top_k=3), LLMParams(), OrchestrationParams(max_workers=1))
    out = run_method(DatasetPaths("toy"), "proprag", None, params, stage="retrieve-proprag")
    summary = write_method_outputs("toy", "proprag", "proprag", "retrieve-proprag", out, 0.2)
    p = DatasetPaths("toy")
    assert read_parquet(p.run("proprag"))["rank"].tolist() == [1, 2, 3, 1, 2, 3]
    assert len(read_parquet(p.trace("proprag"))) == 2
    assert read_json(p.usage("retrieve-proprag"))["questions"] == summary["questions"] == 2
