"""``stages.retrieve_method``: one stage entry for every LLM method family, with the names,
usage files and labels the per-family stages had; every method runs through the one flow
(:func:`flows.method.run_method`) and its family (:attr:`Method.family`) picks its names."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from stages.retrieve_method import LINE_KEYS, VARIANT_FAMILIES, line_value, stage_names

FIRST_STAGE = {"bm25", "dense"}
"""Run by ``stages.retrieve``, not by this entry."""

OLD_FAMILIES: dict[str, str] = {
    "evireform": "evireform", "cee": "cee",
    "hipporag2": "graph", "catrag": "graph", "proprag": "graph",
    "hyde": "expansion", "query2doc": "expansion", "lamer": "expansion",
    "ircot": "iterative", "self_ask": "iterative", "s2g_rag": "iterative", "gear": "iterative",
    "listwise": "rerank", "cross_encoder": "rerank",
}
"""``--method`` → family as the stage's literal table had it (any other name: a registered
method, ``hybrid`` included)."""


def llm_methods() -> dict[str, Any]:
    from evichain.methods.base import methods

    return {name: m for name, m in methods().items() if name not in FIRST_STAGE}


def old_names(dataset: str, method: str, variant: str | None) -> tuple[str, ...]:
    """(variant, run, usage, flow stage, label) by the per-family stages' rules."""
    from evichain.methods.base import get_method

    family = OLD_FAMILIES.get(method)
    if family is None:
        v = get_method(method).check_variant(variant)
        run = method if v == "default" else f"{method}-{v}"
        return v, run, f"retrieve-{run}", f"retrieve-{run}", f"retrieve_method@{dataset}-{run}"
    if family in ("evireform", "cee"):
        v = variant or "full"
        return (v, f"{method}-{v}", f"retrieve_{method}-{v}", f"retrieve_{method}-{v}",
                f"retrieve_{method}@{dataset}-{v}")
    if family == "rerank":
        run = f"rerank-{method}"
        return (method, run, f"retrieve-{run}", f"retrieve_rerank-{method}",
                f"retrieve_rerank@{dataset}-{method}")
    if family == "iterative":
        stage = "retrieve_iterative_graph" if method == "gear" else "retrieve_iterative"
        label = f"{stage}@{dataset}-{method}"
    else:
        label = f"retrieve_{family}@{dataset}-{method}"
    flow_stage = f"retrieve_expansion-{method}" if family == "expansion" else f"retrieve-{method}"
    return method, method, f"retrieve-{method}", flow_stage, label


def test_every_llm_method_has_a_family_with_a_done_line() -> None:
    from evichain.methods.base import Method

    found = llm_methods()
    assert set(OLD_FAMILIES) <= set(found) and "hybrid" in found
    for name, method in found.items():
        assert isinstance(method, Method)
        assert method.family in LINE_KEYS, (name, method.family)
        if method.family in VARIANT_FAMILIES:
            assert "full" in method.variants, name
    assert found["hybrid"].family == "registered"
    assert VARIANT_FAMILIES <= set(LINE_KEYS) and "registered" in LINE_KEYS


NEW_METHODS = ("fused",)
"""Methods registered after the per-family stages were removed: no old names to keep."""


def test_stage_names_are_the_old_names_for_every_method() -> None:
    for name, method in llm_methods().items():
        if name in NEW_METHODS:
            continue
        variants: list[str | None] = [None]
        if OLD_FAMILIES.get(name) in VARIANT_FAMILIES or name not in OLD_FAMILIES:
            variants += list(method.variants)
        for variant in variants:
            names = stage_names("d", name, variant)
            got = (names.variant, names.run, names.usage, names.flow_stage, names.label)
            assert got == old_names("d", name, variant), (name, variant)


def test_the_fused_runs_are_named_as_the_fuse_stages_name_them() -> None:
    """``fused``'s run is its variant's name, the file ``fuse`` / ``fuse_seeds`` write."""
    for variant in ("evireform-fused", "seeds-fused"):
        assert stage_names("d", "fused", variant).run == variant


def test_every_method_runs_through_the_one_flow() -> None:
    from flows.method import run_method

    assert list(inspect.signature(run_method).parameters) == [
        "paths", "method", "variant", "params", "stage"]


@pytest.mark.parametrize(("method", "variant", "expected"), [
    ("evireform", None, ("full", "evireform-full", "retrieve_evireform-full",
                         "retrieve_evireform-full", "retrieve_evireform@d-full")),
    ("evireform", "base", ("base", "evireform-base", "retrieve_evireform-base",
                           "retrieve_evireform-base", "retrieve_evireform@d-base")),
    ("cee", "robust", ("robust", "cee-robust", "retrieve_cee-robust", "retrieve_cee-robust",
                       "retrieve_cee@d-robust")),
    ("catrag", None, ("catrag", "catrag", "retrieve-catrag", "retrieve-catrag",
                      "retrieve_graph@d-catrag")),
    ("hyde", None, ("hyde", "hyde", "retrieve-hyde", "retrieve_expansion-hyde",
                    "retrieve_expansion@d-hyde")),
    ("ircot", None, ("ircot", "ircot", "retrieve-ircot", "retrieve-ircot",
                     "retrieve_iterative@d-ircot")),
    ("gear", None, ("gear", "gear", "retrieve-gear", "retrieve-gear",
                    "retrieve_iterative_graph@d-gear")),
    ("listwise", None, ("listwise", "rerank-listwise", "retrieve-rerank-listwise",
                        "retrieve_rerank-listwise", "retrieve_rerank@d-listwise")),
])
def test_names_are_the_per_family_stages_names(method: str, variant: str | None,
                                               expected: tuple[str, ...]) -> None:
    names = stage_names("d", method, variant)
    assert (names.variant, names.run, names.usage, names.flow_stage, names.label) == expected


def test_unknown_method_or_stray_variant_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown --method 'flare'"):
        stage_names("d", "flare")
    with pytest.raises(ValueError, match="no variants"):
        stage_names("d", "ircot", "full")


def test_line_values() -> None:
    summary = {"questions": 2, "llm_usage": {"calls": 3}, "latency_compute": {"p50_ms": 1.5}}
    assert line_value(summary, "llm_calls") == (True, 3)
    assert line_value(summary, "cache_hits") == (True, 0)
    assert line_value(summary, "compute_p50_ms") == (True, 1.5)
    assert line_value(summary, "facet_source") == (False, None)
    assert line_value(summary, "bridge_added") == (False, None)


def test_the_one_entry_takes_method_and_variant_and_rejects_unknown_methods() -> None:
    from typer.testing import CliRunner

    from stages.retrieve_method import app

    out = CliRunner().invoke(app, ["--dataset", "d", "--method", "flare"])
    assert out.exit_code == 2 and "unknown --method 'flare'" in out.output
    help_text = CliRunner().invoke(app, ["--help"]).output
    assert "--method" in help_text and "--variant" in help_text
