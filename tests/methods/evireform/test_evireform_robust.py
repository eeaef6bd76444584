"""The variants of ours (issue 38): ``robust`` (backstop, backfill, tail by score) and
``hybrid`` (coverage-aware selection over the robust pool), their equations on hand-made
vectors, and that their LLM prompts are exactly ``full``'s (so they replay ``full``'s answers)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evichain.config import EmbedParams, LLMParams, ParamsError, load_params
from evichain.embed import get_embedder
from evichain.llm import LLMCache, LLMClient
from evichain.llm.scripted import set_responder
from evichain.methods.evireform.llm_steps import EviReformLLM
from evichain.methods.evireform.params import EviReformParams, RobustParams
from evichain.methods.evireform.readout import passage_best, rank_with_tail
from evichain.methods.evireform.retrieve import backfilled, backstop
from evichain.methods.evireform.tuning import (choose, config_params, hybrid_grid,
                                               objective_value, robust_grid)
from evichain.methods.evireform.variants import VARIANTS, variant_params
from evichain.methods.hybrid import HybridRetriever, aspect_coverage, make_retriever
from tests.fixtures.lothair import QUESTION
from tests.methods.evireform.test_evireform_retrieve import GOLD, index, respond, write_toy_dataset


def test_backfill_keeps_the_llm_ids_first_and_fills_in_candidate_order() -> None:
    cands = np.array([7, 3, 9, 1, 4])
    assert backfilled([9], cands, 3) == [9, 7, 3]
    assert backfilled([9, 7, 3, 1], cands, 3) == [9, 7, 3, 1]        # never drops an LLM id
    assert backfilled([], cands, 2) == [7, 3]


def test_backstop_is_the_l1_normalised_candidate_similarity() -> None:
    u = np.array([0.5, 0.2, 0.0, 0.3, 0.9])
    b = backstop(u, np.array([0, 3]))
    assert b.tolist() == pytest.approx([0.625, 0.0, 0.0, 0.375, 0.0])
    assert backstop(np.zeros(3), np.array([1])).sum() == 0.0


def test_tail_by_score_replaces_stored_order_after_the_last_positive_score() -> None:
    scores = np.array([0.0, 0.4, 0.0, 0.0, 0.7])
    tail = np.array([0.1, 0.0, 0.9, 0.5, 0.0])
    assert rank_with_tail(scores, tail, 4).tolist() == [4, 1, 2, 3]
    assert rank_with_tail(scores, tail, 1).tolist() == [4]
    best = passage_best(np.array([0.2, 0.6, 0.1, 0.0]), np.array([0, 0, 2, 2]), 3)
    assert best.tolist() == [0.6, 0.0, 0.1]


def test_aspect_coverage_is_the_best_proposition_per_passage() -> None:
    H = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    starts = np.array([0, 2, 2, 3])                     # passage 1 has no propositions
    probes = np.array([[1.0, 0.0], [0.0, -1.0]])
    g = aspect_coverage(H, starts, [0, 1, 2], probes)
    np.testing.assert_allclose(g, [[1.0, 0.0, 0.6], [0.0, 0.0, 0.0]])


def test_paper_variants_are_untouched_and_ours_take_the_robust_block() -> None:
    p = EviReformParams(robust=RobustParams(backstop_eps=0.25, backfill=False, k_r=8))
    for name in VARIANTS:
        v = variant_params(p, name)
        assert (v.backstop_eps, v.backfill, v.tail_order, v.final) == (0.0, False, "stored", "readout")
    r, h = variant_params(p, "robust"), variant_params(p, "hybrid")
    assert (r.backstop_eps, r.backfill, r.k_r, r.tail_order, r.final) == (0.25, False, 8, "score", "readout")
    assert h.final == "coverage" and h.reformulation and h.propagation and h.selection == "llm"
    with pytest.raises(ParamsError, match="unknown EviReform variant 'robustt'"):
        variant_params(p, "robustt")


def _retrieve(tmp_path: Path, variant: str, cache: str = "llm.sqlite"):  # type: ignore[no-untyped-def]
    set_responder(respond)
    params = variant_params(EviReformParams(top_k=7, max_selected=3), variant)
    client = LLMClient(LLMParams(model="scripted/robust", backoff_base_s=0.0),
                       cache=LLMCache(tmp_path / cache))
    retriever = make_retriever(index(), params, EviReformLLM(client, params),
                               get_embedder(EmbedParams()).encode)
    h_q = get_embedder(EmbedParams()).encode([QUESTION])[0]
    return retriever, retriever.retrieve("q1", QUESTION, h_q, GOLD), client


def test_robust_and_hybrid_replay_fulls_answers(tmp_path: Path) -> None:
    _, full, c_full = _retrieve(tmp_path, "full")
    assert c_full.usage.as_dict()["calls"] == 2
    set_responder(lambda m, model: (_ for _ in ()).throw(AssertionError("LLM called")))
    for variant in ("robust", "hybrid"):
        retriever, res, client = _retrieve(tmp_path, variant)
        set_responder(lambda m, model: (_ for _ in ()).throw(AssertionError("LLM called")))
        assert client.usage.as_dict()["calls"] == 0, variant         # same prompts: cache only
        assert res.trace["observed_passage_ids"] == full.trace["observed_passage_ids"]
        assert res.trace["residual_queries"] == full.trace["residual_queries"]
        assert res.trace["n_backfilled"] == 2                       # 1 LLM id + 2 = max_selected
        ranked = [r[2] for r in res.rows]
        assert len(ranked) == 7 == len(set(ranked))
        scores = [r[3] for r in res.rows]
        assert scores == sorted(scores, reverse=True)
        assert {"d0", "d1"} <= set(ranked[:2]), (variant, ranked)
    assert isinstance(retriever, HybridRetriever) and res.trace["coverage_aspects"] == 2


def test_tuning_grids_objective_and_choice() -> None:
    t = EviReformParams().tuning
    grid = robust_grid(t)
    assert len(grid) == len(t.backstop_eps) * len(t.backfill) * len(t.k_r)
    assert grid[0] == {"backstop_eps": t.backstop_eps[0], "backfill": t.backfill[0], "k_r": t.k_r[0]}
    hyb = hybrid_grid(t, grid[3])
    assert len(hyb) == len(t.coverage_pool) * len(t.coverage_weight) and hyb[0]["k_r"] == grid[3]["k_r"]
    per_q = pd.DataFrame({"question_id": ["a", "b"], "Recall@5": [1.0, 0.5], "Chain@5": [1.0, 0.0]})
    assert objective_value(per_q, ["Recall@5", "Chain@5"]) == pytest.approx(1.25)
    with pytest.raises(ValueError, match="unknown metric"):
        objective_value(per_q, ["R@5"])
    table = pd.DataFrame({"k_r": [2, 4, 8], "objective": [0.5, 0.9, 0.9]})
    assert choose(table, ["k_r"]) == {"k_r": 4}                      # first of the tied best
    cfg = config_params(EviReformParams(), "hybrid", {"coverage_pool": 10, "k_r": 4})
    assert (cfg.coverage_pool, cfg.k_r, cfg.final) == (10, 4, "coverage")


def test_params_yaml_robust_block_is_the_recorded_tuning_choice() -> None:
    """``evireform.robust`` must hold what ``tune_evireform`` chose (reports/tuning/)."""
    import json

    full = load_params("params.yaml")
    params = full.evireform
    assert full.tuning_datasets, "params.yaml tunes the variants of ours nowhere"
    tuning_dataset = full.tuning_datasets[0]
    recorded = Path(f"reports/tuning/{tuning_dataset}-evireform.json")
    if not recorded.exists():
        pytest.fail(f"{recorded} missing: run `dvc repro tune_evireform` and commit it")
    search = json.loads(recorded.read_text())
    chosen = search["chosen"]
    assert {k: getattr(params.robust, k) for k in chosen} == chosen
    tune, reported = full.data.samples[tuning_dataset], full.data.samples["2wiki_s"]
    # the recorded search ran on the whole tuning sample params.yaml names
    assert search["questions"] == tune.n_questions
    assert tune.source == reported.source and tune.offset >= reported.offset + reported.n_questions


def test_ours_section_contrasts_each_variant_with_comparators_and_parent() -> None:
    from evichain.report.ours import difference_rows, ours_section

    q = [f"q{i}" for i in range(20)]
    per_q = {"evireform-hybrid": pd.DataFrame({"question_id": q, "Recall@5": [1.0] * 20}),
             "proprag": pd.DataFrame({"question_id": q, "Recall@5": [0.5] * 20}),
             "evireform-full": pd.DataFrame({"question_id": q[:10], "Recall@5": [0.0] * 10})}
    rows = difference_rows(per_q, "toy", ["evireform-hybrid", "cee-robust"], ["proprag"],
                           ["Recall@5"], 200)
    assert rows[["b", "n", "difference"]].values.tolist() == [["proprag", 20, 50.0],
                                                             ["evireform-full", 10, 100.0]]
    md = ours_section(per_q, "toy", ["evireform-hybrid", "cee-robust"], ["proprag"], ["Recall@5"], 200)
    assert "+50.00 [+50.00, +50.00]" in md and "| yes |" in md and "cee-robust" in md
    assert ours_section({"proprag": per_q["proprag"]}, "toy", ["cee-robust"], ["proprag"],
                        ["Recall@5"], 200) == ""
    # seeds-fused departs from both seed methods: contrasted with each paper-faithful parent
    both = {**per_q, "seeds-fused": per_q["evireform-hybrid"],
            "cee-full": pd.DataFrame({"question_id": q, "Recall@5": [0.25] * 20})}
    rows = difference_rows(both, "toy", ["seeds-fused"], ["proprag"], ["Recall@5"], 200)
    assert rows["b"].tolist() == ["proprag", "evireform-full", "cee-full"]


def test_tuning_flow_searches_both_grids_from_fulls_answers(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from evichain.config import OrchestrationParams, parse_params
    from evichain.methods.evireform.params import TuningParams
    from flows.evireform import tuning_flow
    from flows.method import retrieval_flow

    monkeypatch.setenv("EVICHAIN_LLM_CACHE", str(tmp_path / "llm.sqlite"))
    paths = write_toy_dataset(tmp_path)
    grids = TuningParams(backstop_eps=[0.0, 1.0], backfill=[True], k_r=[2, 4],
                         coverage_pool=[3, 7], coverage_weight=[1.0])
    llm, orch = LLMParams(model="scripted/tune", backoff_base_s=0.0), OrchestrationParams(max_workers=2)
    params = parse_params({}).model_copy(update={
        "evireform": EviReformParams(top_k=7, tuning=grids), "llm": llm, "orchestration": orch,
        "embed": EmbedParams()})
    set_responder(respond)
    retrieval_flow(paths, "evireform", "full", params, "t-full")             # full records the answers
    set_responder(lambda m, model: (_ for _ in ()).throw(AssertionError("LLM called")))
    out = tuning_flow(paths, params)
    assert out.summary["llm_usage"]["calls"] == 0 and out.summary["configurations"] == 6
    assert out.table["variant"].tolist() == ["robust"] * 4 + ["hybrid"] * 2
    assert set(out.chosen) == {"backstop_eps", "backfill", "k_r", "coverage_pool", "coverage_weight"}
    robust = out.table[out.table["variant"] == "robust"]
    best = robust.iloc[int(robust["objective"].to_numpy().argmax())]
    assert out.chosen["k_r"] == best["k_r"] and out.chosen["backstop_eps"] == best["backstop_eps"]
    assert (out.table["objective"] == out.table["Recall@5"] + out.table["Chain@5"]).all()
