"""CEE ``robust``'s bridge score inheritance γ (ours, issue 38): its grid on a tuning sample
(:mod:`evichain.methods.cee.tuning`, ``flows.cee_tuning.tuning_flow``, ``stages.tune_cee``) and the
rule that ``params.yaml`` holds what the recorded tuning chose."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from evichain.config import (
    EmbedParams,
    LLMParams,
    OrchestrationParams,
    load_params,
    parse_params,
)
from evichain.llm.scripted import set_responder
from evichain.methods.cee.params import CEEParams, CEETuningParams, variant_params
from evichain.methods.cee.retrieve import rank_pool
from evichain.methods.cee.tuning import choose, grid_table, ranked_rows
from tests.methods.cee.test_cee_facets import write_fixture
from tests.methods.cee.test_cee_retrieve import PARAMS, Explore
from tests.methods.cee.test_cee_robust import (
    BRIDGE_PARAMS,
    QB,
    Bridge,
    bridge_passages,
    bridge_retriever,
)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def fake_embeddings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixture encoder in place of the embedding service, in the facet and retrieval flows."""
    import flows.cee
    import flows.method
    from tests.methods.cee.test_cee_facets import _FakeEmbedder, fake_encode

    for module in (flows.cee, flows.method):
        monkeypatch.setattr(module, "encode_all", lambda texts, *a, **k: fake_encode(list(texts)))
    monkeypatch.setattr(flows.method, "get_embedder", lambda embed: _FakeEmbedder())


def test_ranked_rows_are_rank_pool_s_for_each_gamma(tmp_path: Path) -> None:
    set_responder(Bridge())
    params = variant_params(BRIDGE_PARAMS, "robust")
    r = bridge_retriever(tmp_path, params)
    ex = r.explorer.run(QB)
    passages = bridge_passages()
    for gamma in (0.0, 0.9):
        p = params.model_copy(update={"bridge_inherit": gamma})
        want = rank_pool(ex.probe_vectors, r.E, r.bank, ex.pool, p, ex.bridge_rows, ex.bridge_sources)
        rows = ranked_rows("q", ex, r.E, r.bank, passages, p)
        assert [x[2] for x in rows] == [passages[i].passage_id for i in want.rows]
        assert [x[3] for x in rows] == pytest.approx(want.scores)
        assert [x[1] for x in rows] == list(range(1, len(rows) + 1))
    # the retriever writes the same rows as the tuning code for its own γ
    p = params.model_copy(update={"bridge_inherit": 0.9})
    live = bridge_retriever(tmp_path, p).retrieve("q", QB, ["b0", "b1"]).rows
    assert live == ranked_rows("q", ex, r.E, r.bank, passages, p)


def test_grid_table_objective_and_choice(tmp_path: Path) -> None:
    set_responder(Bridge())
    params = variant_params(BRIDGE_PARAMS, "robust")
    r = bridge_retriever(tmp_path, params)
    explored = [("q", r.explorer.run(QB))]
    questions = pd.DataFrame({"question_id": ["q"], "question": [QB], "answers": [["x"]],
                              "gold_passage_ids": [["b0", "b1"]]})
    table = grid_table(explored, r.E, r.bank, bridge_passages(), params, questions,
                       [0.0, 0.5, 1.0], ["Recall@1", "Chain@2"])
    assert table["bridge_inherit"].to_list() == [0.0, 0.5, 1.0]
    assert (table["objective"] == table["Recall@1"] + table["Chain@2"]).all()
    with pytest.raises(ValueError, match="cee.tuning.objective"):
        grid_table(explored, r.E, r.bank, bridge_passages(), params, questions, [0.0], ["Nope@5"])
    tied = pd.DataFrame({"bridge_inherit": [0.0, 0.5, 1.0], "objective": [1.0, 1.5, 1.5]})
    assert choose(tied) == 0.5                                   # ties: the first listed
    assert choose(tied.assign(objective=[2.0, 1.5, 1.5])) == 0.0


def test_tuning_grid_validates_its_values() -> None:
    assert CEEParams().tuning.bridge_inherit[0] == 0.0             # off listed first
    with pytest.raises(ValueError, match="bridge_inherit"):
        CEETuningParams(bridge_inherit=[0.5, 1.5])
    with pytest.raises(ValueError, match="bridge_inherit"):
        CEEParams(bridge_inherit=-0.1)


def test_tuning_flow_explores_once_and_replays(tmp_path: Path, fake_embeddings: None,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.cee_tuning import tuning_flow

    monkeypatch.setenv("EVICHAIN_LLM_CACHE", str(tmp_path / "llm.sqlite"))
    paths = write_fixture(tmp_path / "artifacts")
    cee = PARAMS.model_copy(update={"tuning": CEETuningParams(bridge_inherit=[0.0, 1.0])})
    llm, orch = LLMParams(model="scripted/tune-cee", backoff_base_s=0.0), OrchestrationParams(max_workers=2)
    params = parse_params({}).model_copy(update={"cee": cee, "llm": llm, "orchestration": orch,
                                                 "embed": EmbedParams()})
    model = Explore()
    set_responder(model)
    out = tuning_flow(paths, params)
    n_questions = len(pd.read_parquet(paths.questions))
    assert out.summary["questions"] == n_questions and out.summary["configurations"] == 2
    assert out.table["bridge_inherit"].to_list() == [0.0, 1.0]
    assert out.summary["facets"]["source"] == "sentences"         # robust: LLM-free facets
    assert model.calls.count("initial") == n_questions              # explored once, not per γ
    assert out.chosen == choose(out.table)
    set_responder(lambda m, model: (_ for _ in ()).throw(AssertionError("LLM called")))
    again = tuning_flow(paths, params)
    assert again.summary["llm_usage"]["calls"] == 0
    assert_frame_equal(again.table, out.table)


def test_tune_cee_stage_refuses_a_reported_dataset(tmp_path: Path, fake_embeddings: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from stages.tune_cee import app

    write_fixture(tmp_path / "artifacts")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"tuning_datasets": []}))
    out = CliRunner().invoke(app, ["--dataset", "fx"])
    assert out.exit_code != 0 and not (tmp_path / "reports" / "tuning").exists()


def test_params_yaml_bridge_inherit_is_the_recorded_tuning_choice() -> None:
    """``cee.bridge_inherit`` must be what ``tune_cee`` chose on the whole tuning sample (its
    committed JSON), or 0 (off) while no tuning is recorded."""
    P = load_params(ROOT / "params.yaml")
    records = [ROOT / "reports" / "tuning" / f"{ds}-cee.json" for ds in P.tuning_datasets]
    present = [p for p in records if p.exists()]
    if not present:
        assert P.cee.bridge_inherit == 0.0, "cee.bridge_inherit set without a recorded tune_cee"
        return
    for path in present:
        rec = json.loads(path.read_text())
        assert rec["questions"] == P.data.samples[rec["dataset"]].n_questions
        assert rec["objective"] == P.cee.tuning.objective
        table = pd.read_csv(path.with_suffix(".csv"))
        assert table["bridge_inherit"].tolist() == pytest.approx(P.cee.tuning.bridge_inherit)
        assert choose(table) == pytest.approx(rec["chosen"]["bridge_inherit"])
        assert P.cee.bridge_inherit == pytest.approx(rec["chosen"]["bridge_inherit"])

