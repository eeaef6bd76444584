"""The ``fused`` method (issue 61): its ranking is :func:`score_fusion` of its components' own
runs (ids exact, scores within 1e-9), for both variants, with the scripted LLM on a small
Lothair corpus (sentence proposition index, a deterministic hashed-words encoder); its trace
carries the components' tokens as ``fused_trace`` names them; clear errors."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest

from evichain.config import Params, parse_params
from evichain.llm.scripted import set_responder
from evichain.methods.base import BuildContext, QuestionResult, get_method, run_frame
from evichain.methods.fused.method import Fused, FusedResult, fuse_question, resolve_run
from evichain.metrics.frames import as_polars
from evichain.retrieval.fusion import fused_trace, score_fusion
from tests.fixtures.lothair import SEVEN_PASSAGES, sentence_index
from tests.fixtures.scripted_llm import respond

CORPUS = pl.DataFrame(SEVEN_PASSAGES, schema=["passage_id", "title", "text"], orient="row")
QUESTIONS = pl.DataFrame({
    "question_id": ["q1", "q2", "q3"],
    "question": ["When did Lothair II's mother die?", "Where did Ermengarde of Tours die?",
                 "Who was the father of Lothair II?"]})
GOLD = {"q1": ["d0", "d1"], "q2": ["d1"], "q3": ["d0"]}
COMPONENTS = {"evireform-robust": ("evireform", "robust"), "proprag": ("proprag", None),
              "cee-robust": ("cee", "robust")}
"""Every run the two variants fuse, with the method and variant that make it (written out
here, not resolved by the code under test)."""


def encode(texts: Sequence[str]) -> np.ndarray:
    """L2-normalised hashed bags of lower-case words (64 dims): deterministic, no model."""
    out = np.zeros((len(texts), 64))
    for i, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            out[i, int(hashlib.sha1(word.encode()).hexdigest(), 16) % 64] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


@lru_cache(maxsize=1)
def index_tables() -> dict[str, pl.DataFrame]:
    """The sentence proposition index of the corpus, as the index stages write it (polars)."""

    props, entities, incidence = (as_polars(t) for t in sentence_index(CORPUS.to_pandas()))
    return {"propositions": props, "entities": entities, "incidence": incidence}


def make_params(record: Path) -> Params:
    return parse_params({
        "llm": {"model": "scripted/fused", "max_retries": 0, "backoff_base_s": 0.0},
        "cee": {"k_cand": 2, "k_final": 3, "top_k": 5, "rounds": 2},
        "fusion": {"runs": ["evireform-robust", "proprag"], "weights": [0.2, 0.8], "depth": 5},
        "fused": {"seeds_record": str(record)},
    })


@pytest.fixture()
def record(tmp_path: Path) -> Path:
    path = tmp_path / "seed_fusion.json"
    path.write_text(json.dumps({"runs": ["evireform-robust", "cee-robust"], "chosen_w": 0.3,
                                "depth": 4, "rule": "test"}), encoding="utf-8")
    return path


def context(params: Params) -> BuildContext:
    return BuildContext(CORPUS, params, encode=encode, tables=index_tables(), gold=GOLD,
                        questions=QUESTIONS)


def retrieve_all(retriever: object) -> list[QuestionResult]:
    return [retriever.retrieve(q, text)  # type: ignore[attr-defined]
            for q, text in zip(QUESTIONS["question_id"], QUESTIONS["question"])]


def own_results(params: Params, run: str) -> list[QuestionResult]:
    """A component's own run: its method built alone, every question retrieved."""
    name, variant = COMPONENTS[run]
    return retrieve_all(get_method(name).build(context(params), variant))


@pytest.mark.parametrize("variant", ["evireform-fused", "seeds-fused"])
def test_fused_ranking_equals_score_fusion_of_the_components_runs(variant: str, record: Path) -> None:
    set_responder(respond)
    params = make_params(record)
    fused = get_method("fused")
    fusion = fused.fusion(params, variant)
    expected_runs = {"evireform-fused": ["evireform-robust", "proprag"],
                     "seeds-fused": ["evireform-robust", "cee-robust"]}[variant]
    assert fusion.runs == expected_runs
    own = {run: own_results(params, run) for run in fusion.runs}
    expected = score_fusion({run: run_frame(rs) for run, rs in own.items()}, fusion.weight_of(),
                            fusion.depth)
    results = retrieve_all(fused.build(context(params), variant))
    got = run_frame(results)

    assert got["question_id"].nunique() == len(QUESTIONS)
    assert got.groupby("question_id").size().max() == fusion.depth
    key = ["question_id", "rank", "passage_id"]
    assert got[key].values.tolist() == expected[key].values.tolist()
    assert got["score"].tolist() == pytest.approx(expected["score"].tolist(), abs=1e-9, rel=0)
    swapped = dict(zip(fusion.runs, reversed(fusion.weights)))           # the check can fail
    other = score_fusion({run: run_frame(rs) for run, rs in own.items()}, swapped, fusion.depth)
    assert other["score"].tolist() != pytest.approx(got["score"].tolist(), abs=1e-9, rel=0)

    traces = {run: pd.DataFrame([{"question_id": q, **r.trace}
                                 for q, r in zip(QUESTIONS["question_id"], rs)])
              for run, rs in own.items()}
    tokens = fused_trace(traces)
    by_question = {r.pop("question_id"): r for r in tokens.iter_rows(named=True)}
    for q, result in zip(QUESTIONS["question_id"], results):
        assert isinstance(result, FusedResult) and set(result.parts) == set(fusion.runs)
        row = {k: v for k, v in result.trace.items() if k.endswith("_tokens")}
        assert row == by_question[q]
    assert int(tokens["evireform-robust_prompt_tokens"].sum()) > 0        # the LLM steps counted
    usage = {k: sum(r.usage[k] for r in results) for k in ("prompt_tokens", "completion_tokens")}
    assert usage == {k: sum(r.usage[k] for rs in own.values() for r in rs) for k in usage}


def test_trace_keeps_the_components_fields_and_summary_their_counts(record: Path) -> None:
    set_responder(respond)
    params = make_params(record)
    fused = get_method("fused")
    ctx = context(params)
    index = fused.index(ctx, "evireform-fused")
    assert set(index) == {"evireform-robust", "proprag"}
    results = retrieve_all(fused.build(ctx, "evireform-fused", index))
    trace = pd.DataFrame([{"question_id": q, **r.trace} for q, r in zip(QUESTIONS["question_id"], results)])
    assert {"evireform-robust.selection_status", "proprag.status", "status"} <= set(trace.columns)
    assert not [c for c in trace.columns if c.startswith("evireform-robust.") and c.endswith("_tokens")]
    assert set(trace["status"]) == {"ok"}
    summary = fused.summary(params, "evireform-fused", trace, results, index)
    assert summary["fusion"] == {"runs": ["evireform-robust", "proprag"], "weights": [0.2, 0.8],
                                 "depth": 5}
    assert summary["components"]["evireform-robust"]["questions"] == len(QUESTIONS)
    assert summary["components"]["proprag"]["index"]["propositions"] > 0
    assert all("compute" in r.seconds and "fusion" in r.seconds for r in results)


def test_fuse_question_applies_the_formula_and_reads_failures() -> None:
    """f = Σ w · s / max s: a's 2.0 and 1.0 scale to 1 and 0.5; b (no rows, a failed LLM call)
    adds nothing and makes the question ``partial``."""
    a = QuestionResult([("q", 1, "p1", 2.0), ("q", 2, "p2", 1.0)],
                       {"prompt_tokens": 3, "completion_tokens": 1, "status": "ok", "n": 7})
    b = QuestionResult([], {"llm_failures": ["timeout"], "sel_prompt_tokens": 5})
    out = fuse_question("q", {"a": a, "b": b}, {"a": 0.5, "b": 0.5}, 5)
    assert out.rows == [("q", 1, "p1", 0.5), ("q", 2, "p2", 0.25)]
    assert out.trace == {"a_prompt_tokens": 3, "a_completion_tokens": 1, "b_prompt_tokens": 5,
                         "b_completion_tokens": 0, "a.status": "ok", "a.n": 7,
                         "b.llm_failures": ["timeout"], "status": "partial"}
    assert out.usage == {"prompt_tokens": 8, "completion_tokens": 1}


def test_run_names_resolve_to_registered_methods() -> None:
    assert [(m.name, v) for m, v in map(resolve_run, ["evireform-robust", "proprag", "cee-robust"])] \
        == [("evireform", "robust"), ("proprag", "default"), ("cee", "robust")]
    with pytest.raises(ValueError, match="'evireform-fused' must be the run of exactly one"):
        resolve_run("evireform-fused")
    with pytest.raises(ValueError, match="'nope' must be the run of exactly one"):
        resolve_run("nope")


def test_names_variants_and_errors(tmp_path: Path, record: Path) -> None:
    fused = get_method("fused")
    assert isinstance(fused, Fused) and fused.family == "registered"
    assert fused.label() == fused.run_name() == "evireform-fused"
    assert fused.run_name("seeds-fused") == "seeds-fused"
    with pytest.raises(ValueError, match="no variant 'robust'"):
        fused.check_variant("robust")
    params = make_params(record)
    assert fused.tables(params) == ("propositions", "entities", "incidence")
    assert fused.fusion(params, "seeds-fused").weights == [0.3, 0.7]
    missing = make_params(tmp_path / "absent.json")
    with pytest.raises(FileNotFoundError, match="fused.seeds_record"):
        fused.tables(missing, "seeds-fused")
    with pytest.raises(ValueError, match="must map the runs"):
        fused.build(context(params), "evireform-fused", index={"proprag": None})


def test_variants_take_the_fuse_stages_settings() -> None:
    """``evireform-fused``: the ``fusion`` block (stage ``fuse``); ``seeds-fused``: the tuning
    record as stage ``fuse_seeds`` reads it (its own copy of the rule, stages/fuse.py)."""
    from stages.fuse import record_fusion as stage_record_fusion

    root = Path(__file__).resolve().parents[3]
    path = root / "reports" / "tuning" / "2wiki_tune_s-seed_fusion.json"
    params = parse_params({"fused": {"seeds_record": str(path)}})
    fused = get_method("fused")
    assert fused.fusion(params, "evireform-fused") == params.fusion
    assert fused.fusion(params, "seeds-fused") == stage_record_fusion(path, params.fusion.name)
