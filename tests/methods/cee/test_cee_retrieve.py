"""CEE online retrieval with scripted probe/summary replies: rounds of Eq. 1, summaries, stop
reasons, the variants (Table 2), run and trace tables, the zero-call warm re-run of the one
retrieval flow (:mod:`flows.method`), the two
stages end to end on a fixture dataset, the shared scripted fixture's CEE branches, and
PROMPTS.md and docs/reference.md (the README's reference) kept in sync with the prompt texts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from evichain.config import EmbedParams, LLMParams, OrchestrationParams
from evichain.io import read_json, read_parquet, write_parquet
from evichain.llm import LLMCache, LLMClient
from evichain.llm.scripted import set_responder
from evichain.methods.cee.explore import ExploreLLM
from evichain.methods.cee.facets import Passage
from evichain.methods.cee.params import CEEParams, variant_params
from evichain.methods.cee.prompts import ALL_PROMPTS, facet_prompt, probe_prompt, summary_prompt
from evichain.methods.cee.retrieve import CEERetriever
from evichain.methods.cee.scoring import FacetBank, score_pool
from tests.methods.cee.test_cee_facets import PASSAGES, Facets, fake_encode, write_fixture

QUESTION = "When did Lothair II's mother die?"
ROOT = Path(__file__).resolve().parents[3]


class Explore:
    """Scripted probe/summary model. ``next_probes`` is replayed round by round (the last one
    repeats); ``fail`` names steps ('initial', 'summary', 'next') that reply with bad JSON."""

    def __init__(self, next_probes: list[list[str]] | None = None, fail: tuple[str, ...] = ()) -> None:
        self.next = next_probes or [["Ermengarde of Tours died"], ["Ermengarde of Tours died"]]
        self.fail = fail
        self.calls: list[str] = []
        self.payloads: list[dict[str, Any]] = []

    def __call__(self, messages: list[dict[str, Any]], model: str) -> str:
        system, data = messages[0]["content"], json.loads(messages[1]["content"])
        step = ("initial" if system.startswith("You plan searches") else
                "summary" if system.startswith("You summarize") else "next")
        self.calls.append(step)
        self.payloads.append(data)
        if step in self.fail:
            return "{broken"
        if step == "initial":
            return json.dumps({"probes": ["Lothair II mother", "lothair ii  MOTHER"]})
        if step == "summary":
            titles = ", ".join(p["title"] for p in data["passages"])
            return json.dumps({"summary": f"Lothair II's mother is Ermengarde of Tours ({titles})."})
        nxt = self.next[min(self.calls.count("next") - 1, len(self.next) - 1)]
        return json.dumps({"probes": nxt})


def retriever(tmp_path: Path, params: CEEParams, facets: dict[str, list[str]] | None = None) -> CEERetriever:
    passages = [Passage(*p) for p in PASSAGES]
    E = fake_encode([f"{p.title}\n{p.text}" for p in passages])
    facets = facets if facets is not None else {"d1": ["When did Ermengarde of Tours die?"]}
    rows = {p.passage_id: i for i, p in enumerate(passages)}
    owner = [rows[d] for d, fs in facets.items() for _ in fs]
    texts = [f for fs in facets.values() for f in fs]
    bank = FacetBank.build(owner, fake_encode(texts) if texts else np.zeros((0, 64)), len(passages))
    client = LLMClient(LLMParams(model="scripted/cee-online", backoff_base_s=0.0, max_retries=0),
                       cache=LLMCache(tmp_path / "llm.sqlite"))
    return CEERetriever(E, passages, bank, params, ExploreLLM(client, params), fake_encode)


PARAMS = CEEParams(k_cand=2, k_final=3, top_k=5, rounds=4, summary_max_passages=2)


def test_rounds_summaries_probes_and_pool(tmp_path: Path) -> None:
    set_responder(script := Explore())
    res = retriever(tmp_path, PARAMS).retrieve("q1", QUESTION, ["d0", "d1"])
    t = res.trace
    assert t["probes"] == [QUESTION, "Lothair II mother", "Ermengarde of Tours died"]   # deduped
    assert t["probe_rounds"] == [1, 1, 2]
    assert len(t["summaries"]) == 2 and t["summaries"][0].startswith("Lothair II's mother is")
    assert t["rounds_run"] == 2 and t["stop_reason"] == "no_new_probes"     # round 3 repeats
    assert t["pool_sizes"] == sorted(t["pool_sizes"]) and t["pool_size"] == t["pool_sizes"][-1]
    assert script.calls == ["initial", "summary", "next", "summary", "next"]
    summary_in = script.payloads[1]
    assert summary_in["probes"] == [QUESTION, "Lothair II mother"]
    assert len(summary_in["passages"]) == 2 and set(summary_in["passages"][0]) == {"title", "text"}
    assert script.payloads[2] == {"question": QUESTION, "evidence_summary": t["summaries"][0]}
    assert t["gold_in_pool"] == 2 and t["llm_steps"] == 5 and t["prompt_tokens"] > 0
    assert [r[1] for r in res.rows] == list(range(1, len(res.rows) + 1)) and len(res.rows) <= 5
    assert [r[2] for r in res.rows[:3]] == t["selected_ids"]


def test_all_rounds_run_when_probes_keep_changing(tmp_path: Path) -> None:
    set_responder(script := Explore(next_probes=[["Teutberga"], ["Tours Loire"], ["Erstein Alsace"]]))
    t = retriever(tmp_path, PARAMS).retrieve("q1", QUESTION).trace
    assert t["rounds_run"] == 4 and t["stop_reason"] == "rounds" and len(t["summaries"]) == 3
    assert t["probe_rounds"] == [1, 1, 2, 3, 4] and script.calls.count("summary") == 3


def test_without_sequential_exploration_only_round_one_runs(tmp_path: Path) -> None:
    set_responder(script := Explore())
    t = retriever(tmp_path, variant_params(PARAMS, "no_sequential")).retrieve("q1", QUESTION).trace
    assert script.calls == ["initial"] and t["rounds_run"] == 1 and t["summaries"] == []


def test_failed_steps_stop_exploration_and_are_traced(tmp_path: Path) -> None:
    set_responder(Explore(fail=("summary",)))
    res = retriever(tmp_path, PARAMS).retrieve("q1", QUESTION)
    assert res.trace["stop_reason"] == "summary_failed"
    assert res.trace["llm_failures"] == ["round1:summary:invalid_json"] and res.rows
    set_responder(Explore(fail=("initial",)))
    alone = retriever(tmp_path / "fresh", PARAMS.model_copy(update={"question_as_probe": False,
                                                                     "rounds": 1}))
    t = alone.retrieve("q1", QUESTION).trace
    assert t["probes"] == [QUESTION] and "round1:question_fallback" in t["llm_failures"]


def test_variants_rank_by_their_own_scores(tmp_path: Path) -> None:
    set_responder(Explore())
    full = retriever(tmp_path, PARAMS)
    ex = full.explorer.run(QUESTION)
    rows = np.asarray(ex.pool)
    F, mask = full.bank.gather(rows)
    for variant in ("no_coverage", "no_contrastive"):
        settings = variant_params(PARAMS, variant)
        res = retriever(tmp_path, settings).retrieve("q1", QUESTION)
        scores = score_pool(ex.probe_vectors, full.E[rows], F, mask, 0.5, 0.5, settings.contrastive)
        if variant == "no_coverage":
            order = [PASSAGES[rows[i]][0] for i in np.argsort(-scores.s, kind="stable")][:5]
            assert [r[2] for r in res.rows] == order and res.trace["selected_ids"] == []
        else:
            assert scores.s.tolist() == scores.base.tolist() and len(res.trace["selected_ids"]) == 3


def test_the_facet_of_the_second_hop_lifts_it(tmp_path: Path) -> None:
    set_responder(Explore())
    with_facets = retriever(tmp_path, PARAMS).retrieve("q1", QUESTION)
    without = retriever(tmp_path, PARAMS, facets={}).retrieve("q1", QUESTION)
    score = {r[2]: r[3] for r in with_facets.rows}
    assert with_facets.trace["n_pool_with_facets"] == 1 and without.trace["n_pool_with_facets"] == 0
    assert score["d1"] >= {r[2]: r[3] for r in without.rows}["d1"]


# --------------------------------------------------------------------------- flow and stages
def _facets(paths: Any) -> None:
    write_parquet(pd.DataFrame([("d1#0", "d1", "d0", "When did Ermengarde of Tours die?")],
                               columns=["facet_id", "passage_id", "neighbour_id", "facet_query"]),
                  paths.dir / "facets.parquet")


def test_flow_tables_and_warm_rerun_makes_no_llm_calls(tmp_path: Path, fake_embeddings: None) -> None:
    from evichain.config import parse_params
    from flows.method import retrieval_flow

    paths = write_fixture(tmp_path / "artifacts")
    _facets(paths)
    params = parse_params({}).model_copy(update={
        "cee": PARAMS, "llm": LLMParams(model="scripted/flow", backoff_base_s=0.0),
        "embed": EmbedParams(), "orchestration": OrchestrationParams(max_workers=2)})
    args = (paths, "cee", None, params, "retrieve_cee")
    set_responder(Explore())
    first = retrieval_flow(*args)
    assert first.run.groupby("question_id").size().max() <= 5
    assert {"probes", "summaries", "pool_sizes", "prompt_tokens"} <= set(first.trace.columns)
    assert first.summary["llm_usage"]["calls"] > 0 and first.summary["questions"] == 2
    set_responder(again := Explore())
    second = retrieval_flow(*args)
    assert again.calls == [] and second.summary["llm_usage"]["calls"] == 0
    pd.testing.assert_frame_equal(first.run, second.run)
    pd.testing.assert_frame_equal(first.trace, second.trace)


def test_stages_write_their_tables(tmp_path: Path, fake_embeddings: None,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from stages.generate_facets import app as facets_app
    from stages.retrieve_method import app as retrieve_app

    write_fixture(tmp_path / "artifacts")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVICHAIN_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    cfg = {"llm": {"model": "scripted/stage", "backoff_base_s": 0.0},
           "cee": {"k_cand": 2, "k_final": 3, "top_k": 5,
                   "facets": {"n_neighbours": 2, "max_pairs_per_passage": 1}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(cfg))
    script = Explore()
    set_responder(lambda m, model: Facets()(m, model) if m[0]["content"].startswith("You write")
                  else script(m, model))
    out = CliRunner().invoke(facets_app, ["--dataset", "fx"])
    assert out.exit_code == 0, out.output
    assert "estimate: facet generation with scripted/stage: 6 LLM calls" in out.output
    status = read_parquet("artifacts/fx/facet_status.parquet")
    assert len(status) == 6 and (status["status"] == "ok").all()
    out = CliRunner().invoke(retrieve_app, ["--dataset", "fx", "--method", "cee", "--variant", "no_coverage"])
    assert out.exit_code == 0, out.output
    run = read_parquet("artifacts/fx/runs/cee-no_coverage.parquet")
    assert list(run.columns) == ["question_id", "rank", "passage_id", "score"]
    assert len(read_parquet("artifacts/fx/traces/cee-no_coverage.parquet")) == 2
    assert read_json("artifacts/fx/usage/retrieve_cee-no_coverage.json")["variant"] == "no_coverage"
    bad = CliRunner().invoke(retrieve_app, ["--dataset", "fx", "--method", "cee", "--variant", "nope"])
    assert bad.exit_code == 2 and "method 'cee' has no variant 'nope'" in bad.output


# --------------------------------------------------------------------------- prompts
def test_shared_scripted_fixture_answers_every_cee_prompt() -> None:
    from tests.fixtures.scripted_llm import respond

    data = {"target": {"title": "A", "text": "a"}, "reference": {"title": "B", "text": "b"},
            "question": "Who is A?", "probes": ["A"], "passages": [{"title": "A", "text": "a"}],
            "evidence_summary": "Found: A"}
    for prompt in (facet_prompt(3), probe_prompt(True, 3), probe_prompt(False, 3), summary_prompt(80)):
        messages = prompt.messages(data=json.dumps(data))
        prompt.schema.model_validate_json(respond(messages, "scripted/demo"))


@pytest.mark.parametrize("doc_path", ["evichain/methods/cee/PROMPTS.md", "docs/reference.md"])
def test_prompt_docs_hold_every_prompt_text(doc_path: str) -> None:
    doc = (ROOT / doc_path).read_text(encoding="utf-8")
    for prompt in ALL_PROMPTS:
        assert prompt.system in doc, f"{doc_path} is out of date for {prompt.key}"
        assert prompt.key in doc


@pytest.fixture
def fake_embeddings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake encoder for the facets flow (``flows.cee``) and the retrieval flow
    (``flows.method``: bulk in the flow thread, the embedder inside tasks)."""
    from tests.methods.cee.test_cee_facets import _FakeEmbedder
    import flows.cee
    import flows.method

    monkeypatch.setattr(flows.cee, "encode_all", lambda texts, *a, **k: fake_encode(list(texts)))
    monkeypatch.setattr(flows.method, "encode_all", lambda texts, *a, **k: fake_encode(list(texts)))
    monkeypatch.setattr(flows.method, "get_embedder", lambda embed: _FakeEmbedder())
