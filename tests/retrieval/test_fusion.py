"""Run-level score fusion (evireform-fused, issue 38): formula, guards, params, stage wiring."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import polars as pl
import pytest
import yaml

from evichain.config import ParamsError, load_params, parse_params
from evichain.io import read_parquet, write_parquet
from evichain.metrics.cost import tokens_per_question
from evichain.retrieval.fusion import fused_trace, score_fusion
from evichain.retrieval.params import FusionParams
from evichain.retrieval.run import run_table

ROOT = Path(__file__).resolve().parents[2]


def _runs() -> dict[str, pd.DataFrame]:
    a = run_table([("q1", 1, "p1", 4.0), ("q1", 2, "p2", 2.0), ("q1", 3, "p3", 1.0),
                   ("q2", 1, "p9", 0.5)])
    b = run_table([("q1", 1, "p3", 0.02), ("q1", 2, "p4", 0.01), ("q1", 3, "p2", 0.005)])
    return {"a": a, "b": b}


def test_fused_score_is_the_weighted_sum_of_max_scaled_scores() -> None:
    fused = score_fusion(_runs(), {"a": 0.5, "b": 0.5}, depth=10)
    q1 = fused[fused["question_id"] == "q1"].set_index("passage_id")["score"]
    # p1: .5*4/4 = .5; p2: .5*2/4 + .5*.005/.02 = .375; p3: .5*1/4 + .5*1 = .625; p4: .5*.5 = .25
    assert q1.to_dict() == pytest.approx({"p3": 0.625, "p1": 0.5, "p2": 0.375, "p4": 0.25})
    assert list(q1.index) == ["p3", "p1", "p2", "p4"]
    assert fused[fused["question_id"] == "q1"]["rank"].tolist() == [1, 2, 3, 4]
    # q2 only in run a: kept, scaled by a's own max
    assert fused[fused["question_id"] == "q2"][["passage_id", "score"]].values.tolist() == [["p9", 0.5]]


def test_weight_one_keeps_the_first_run_order_and_depth_cuts() -> None:
    fused = score_fusion(_runs(), {"a": 1.0, "b": 0.0}, depth=2)
    assert fused[fused["question_id"] == "q1"]["passage_id"].tolist() == ["p1", "p2"]


def test_ties_go_to_the_better_best_rank() -> None:
    a = run_table([("q", 1, "x", 1.0), ("q", 2, "y", 0.5)])
    b = run_table([("q", 1, "y", 1.0), ("q", 2, "x", 0.5)])
    fused = score_fusion({"a": a, "b": b}, {"a": 0.5, "b": 0.5}, depth=5)
    assert fused["score"].tolist() == [0.75, 0.75]
    assert fused["passage_id"].tolist() == ["x", "y"]  # both best rank 1: then the passage id


def test_bad_scores_and_weights_name_the_problem() -> None:
    runs = _runs()
    runs["b"].loc[0, "score"] = -1.0
    with pytest.raises(ValueError, match="run 'b'.*>= 0"):
        score_fusion(runs, {"a": 0.5, "b": 0.5}, 5)
    with pytest.raises(ValueError, match="weights name"):
        score_fusion(_runs(), {"a": 1.0}, 5)
    with pytest.raises(ValueError, match="positive sum"):
        score_fusion(_runs(), {"a": 0.0, "b": 0.0}, 5)


def test_fused_trace_carries_every_runs_tokens_per_question() -> None:
    a = pl.DataFrame({"question_id": ["q1", "q2"], "sel_prompt_tokens": [100, 50],
                      "ref_completion_tokens": [5, 5], "status": ["ok", "ok"]})
    b = pl.DataFrame({"question_id": ["q2", "q1"], "prompt_tokens": [0, 0], "completion_tokens": [0, 0]})
    trace = fused_trace({"a": a, "b": b})
    assert trace["question_id"].to_list() == ["q1", "q2"]  # the first trace's order
    assert trace.row(0, named=True) == {"question_id": "q1", "a_prompt_tokens": 100,
                                        "a_completion_tokens": 5, "b_prompt_tokens": 0,
                                        "b_completion_tokens": 0}
    assert tokens_per_question(trace) == tokens_per_question(a)  # b is LLM-free
    assert fused_trace({}).columns == ["question_id"]


def test_fused_trace_joins_questions_and_fills_missing_tokens() -> None:
    """An outer join in first-seen order (the pandas ``concat(axis=1)`` order it replaced); a
    question missing from a trace, or a null / NaN token cell, counts 0; pandas traces too."""
    a = pd.DataFrame({"question_id": ["q2", "q1"], "prompt_tokens": [3.0, float("nan")],
                      "completion_tokens": [1, 2]})
    b = pl.DataFrame({"question_id": ["q3", "q1"], "x_prompt_tokens": [None, 4]})
    trace = fused_trace({"a": a, "b": b})
    assert trace.to_dict(as_series=False) == {
        "question_id": ["q2", "q1", "q3"], "a_prompt_tokens": [3, 0, 0],
        "a_completion_tokens": [1, 2, 0], "b_prompt_tokens": [0, 4, 0],
        "b_completion_tokens": [0, 0, 0]}
    assert all(t == pl.Int64 for t in trace.schema.dtypes()[1:])


def test_params_validate_the_fusion_block() -> None:
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    P = parse_params(raw)
    assert P.fusion.weight_of() == dict(zip(P.fusion.runs, P.fusion.weights))
    with pytest.raises(ParamsError, match="fusion.*weights has 1 values for 2 runs"):
        parse_params({**raw, "fusion": {**raw["fusion"], "weights": [1.0]}})
    with pytest.raises(ParamsError, match="fusion_datasets.*tuning_datasets"):
        parse_params({**raw, "fusion_datasets": [*raw["tuning_datasets"]]})
    with pytest.raises(ValueError, match="differ from name"):
        FusionParams(name="proprag")


def test_dvc_fuse_stage_reads_the_runs_params_name() -> None:
    """dvc.yaml cannot index a params list, so the fuse stage names its two run deps: they
    must be params.yaml's fusion.runs (and the outs its fusion.name)."""
    stage = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["fuse"]["do"]
    P = load_params(ROOT / "params.yaml")
    for kind in ("runs", "traces"):
        named = [d for d in stage["deps"] if f"/{kind}/" in d]
        assert named == [f"artifacts/${{item}}/{kind}/{name}.parquet" for name in P.fusion.runs]
    assert stage["outs"] == [f"artifacts/${{item}}/{kind}/${{fusion.name}}.parquet"
                             for kind in ("runs", "traces")]


def test_fusion_flow_reads_stored_runs_and_names_a_missing_one(tmp_path: Path) -> None:
    from flows.fuse import fusion_flow

    runs = _runs()
    paths = {}
    for name, run in runs.items():
        paths[name] = tmp_path / f"{name}.parquet"
        write_parquet(run, paths[name])
    trace = tmp_path / "a-trace.parquet"
    write_parquet(pl.DataFrame({"question_id": ["q1", "q2"], "sel_prompt_tokens": [100, 50],
                                "sel_completion_tokens": [10, 5], "ref_prompt_tokens": [7, 0]}), trace)
    llm_free = tmp_path / "b-trace.parquet"  # an LLM-free run's trace: no token columns
    write_parquet(pl.DataFrame({"question_id": ["q1"], "n_paths": [3]}), llm_free)
    params = FusionParams(name="ab", runs=["a", "b"], weights=[0.5, 0.5], depth=3)
    fused, tokens = fusion_flow(paths, params, {"a": trace, "b": llm_free})
    expected = score_fusion({n: read_parquet(p) for n, p in paths.items()}, params.weight_of(), 3)
    pd.testing.assert_frame_equal(fused.reset_index(drop=True), expected.reset_index(drop=True))
    assert tokens.to_dict(as_series=False) == {"question_id": ["q1", "q2"], "a_prompt_tokens": [107, 50],
                                      "a_completion_tokens": [10, 5], "b_prompt_tokens": [0, 0],
                                      "b_completion_tokens": [0, 0]}
    with pytest.raises(FileNotFoundError, match="trace of 'b' not found"):
        fusion_flow(paths, params, {"a": trace, "b": tmp_path / "no-trace.parquet"})
    with pytest.raises(FileNotFoundError, match="run of 'c' not found"):
        fusion_flow({**paths, "c": tmp_path / "c.parquet"},
                    FusionParams(name="abc", runs=["a", "b", "c"], weights=[1, 1, 1]))


def test_tune_script_grid_spans_both_runs_and_picks_the_middle_of_ties() -> None:
    from evichain.retrieval import fusion_tuning as tune

    questions = pd.DataFrame({"question_id": ["q1"], "question": ["?"], "answer": ["a"],
                              "gold_passage_ids": [["p3", "p4"]], "gold_reliable": [True]})
    runs = _runs()
    table = tune.grid(runs["a"], runs["b"], questions, depth=2)
    assert table["w (robust)"].to_list() == list(tune.GRID)
    # top 2 of w = 0 is run b's (gold p3, p4), of w = 1 run a's (p1, p2: no gold)
    assert table["Recall@5"][0] == 100.0 and table["Recall@5"][-1] == 0.0
    tied = pl.DataFrame({"w (robust)": [0.2, 0.3, 0.4, 0.6], "Recall@5": [1, 2, 2, 2],
                         "Chain@5": [0, 0, 0, 0]})
    assert tune.choose(tied) == 0.4


def test_params_yaml_fusion_weights_are_the_recorded_tuning_choice() -> None:
    """``fusion.weights`` must be what the ``tune_fusion`` stage chose on the whole tuning
    sample (its committed JSON record), as ``evireform.robust`` is ``tune_evireform``'s; the
    record's choice must follow its own rows under the stage's rule."""
    import json

    from evichain.retrieval import fusion_tuning as tune

    P = load_params(ROOT / "params.yaml")
    records = sorted((ROOT / "reports" / "tuning").glob("*-fusion.json"))
    assert records, "no reports/tuning/<dataset>-fusion.json: run the tune_fusion stage"
    for path in records:
        rec = json.loads(path.read_text())
        assert rec["dataset"] in P.tuning_datasets
        assert rec["n_questions"] == P.data.samples[rec["dataset"]].n_questions
        assert rec["rule"] == tune.RULE and rec["grid"] == list(tune.GRID)
        rows = pl.DataFrame(rec["rows"])
        assert rows["w (robust)"].to_list() == list(tune.GRID)
        assert tune.choose(rows) == rec["chosen_w"]
        assert P.fusion.weights == pytest.approx([rec["chosen_w"], 1.0 - rec["chosen_w"]])
    md = records[0].with_suffix(".md").read_text()
    assert f"**w = {json.loads(records[0].read_text())['chosen_w']}**" in md


# ---------------------------------------------------------------- seeds-fused (fuse_seeds)
SEED_RECORD = ROOT / "reports" / "tuning" / "2wiki_tune_s-seed_fusion.json"


def test_record_fusion_reads_runs_weight_and_depth(tmp_path: Path) -> None:
    import json

    from stages.fuse import SEEDS_NAME, record_fusion

    path = tmp_path / "rec.json"
    path.write_text(json.dumps({"runs": ["a", "b"], "chosen_w": 0.2, "depth": 7}))
    f = record_fusion(path, taken="evireform-fused")
    assert (f.name, f.runs, f.weights, f.depth) == (SEEDS_NAME, ["a", "b"], [0.2, 0.8], 7)
    path.write_text(json.dumps({"runs": ["a", "b"], "depth": 7}))
    with pytest.raises(ValueError, match="chosen_w"):
        record_fusion(path, taken="evireform-fused")
    path.write_text(json.dumps({"runs": ["a", "b"], "chosen_w": 0.2, "depth": 7}))
    with pytest.raises(ValueError, match="fusion.name"):
        record_fusion(path, taken=SEEDS_NAME)


def test_dvc_fuse_seeds_stage_reads_the_record_it_names() -> None:
    """The fuse_seeds stage's run deps, params file and outs agree with its tuning record."""
    import json

    stage = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["fuse_seeds"]["do"]
    rec = json.loads(SEED_RECORD.read_text())
    assert f"--record {SEED_RECORD.relative_to(ROOT).as_posix()}" in stage["cmd"]
    for kind in ("runs", "traces"):
        named = [d for d in stage["deps"] if f"/{kind}/" in d]
        assert named == [f"artifacts/${{item}}/{kind}/{name}.parquet" for name in rec["runs"]]
    assert stage["params"] == [{SEED_RECORD.relative_to(ROOT).as_posix(): ["runs", "chosen_w", "depth"]}]
    assert stage["outs"] == [f"artifacts/${{item}}/{kind}/seeds-fused.parquet"
                             for kind in ("runs", "traces")]


def test_seed_fusion_record_follows_its_rule_on_the_whole_tuning_sample() -> None:
    """The recorded w is what tune_fusion's rule picks from the record's own rows, on every
    tuning question, with the CEE γ that params.yaml reports with."""
    import json

    from evichain.retrieval import fusion_tuning as tune

    P = load_params(ROOT / "params.yaml")
    rec = json.loads(SEED_RECORD.read_text())
    assert rec["dataset"] in P.tuning_datasets
    assert rec["n_questions"] == P.data.samples[rec["dataset"]].n_questions
    assert rec["rule"] == tune.RULE and rec["grid"] == list(tune.GRID)
    assert rec["runs"] == list(tune.SEED_RUNS) and rec["depth"] == P.fusion.depth
    assert rec["bridge_inherit"] == pytest.approx(P.cee.bridge_inherit)
    rows = pl.DataFrame(rec["rows"])
    assert rows[tune.SEED_LABELS[0]].to_list() == list(tune.GRID)
    assert tune.choose(rows, tune.SEED_LABELS[0]) == rec["chosen_w"]
    assert f"**w = {rec['chosen_w']}**" in SEED_RECORD.with_suffix(".md").read_text()
