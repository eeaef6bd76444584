"""``stages.retrieve_method``: one stage entry for every LLM method family, with the names,
usage files and labels the per-family stages had."""

from __future__ import annotations

import importlib
import inspect
from typing import get_args

import pytest

from stages.retrieve_method import (FLOWS, LINE_KEYS, METHODS, VARIANT_FAMILIES, family_stage,
                                    line_value, stage_names)


def test_methods_are_the_registered_llm_methods() -> None:
    from evichain.methods.base import methods
    from evichain.methods.expansion.params import ExpansionMethod
    from evichain.methods.graph.params import METHODS as GRAPH
    from evichain.methods.iterative.params import METHODS as ITERATIVE
    from evichain.methods.rerank.params import RerankMethod

    # bm25 / dense: stages.retrieve; hybrid: the EviReform variant of that name
    assert set(METHODS) == set(methods()) - {"bm25", "dense", "hybrid"}
    by_family = {f: {m for m, g in METHODS.items() if g == f} for f in FLOWS}
    assert by_family["graph"] == set(GRAPH) and by_family["iterative"] == set(ITERATIVE)
    assert by_family["expansion"] == set(get_args(ExpansionMethod))
    assert by_family["rerank"] == set(get_args(RerankMethod))
    assert set(LINE_KEYS) == set(FLOWS) and VARIANT_FAMILIES <= set(FLOWS)


@pytest.mark.parametrize("family", sorted(FLOWS))
def test_every_family_flow_has_the_stage_entry(family: str) -> None:
    run_method = importlib.import_module(FLOWS[family]).run_method
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


def test_family_shims_keep_their_options() -> None:
    from typer.testing import CliRunner

    app, _ = family_stage("graph")
    out = CliRunner().invoke(app, ["--dataset", "d", "--method", "ircot"])
    assert out.exit_code == 2 and "unknown graph method 'ircot'" in out.output
    for module, option in (("stages.retrieve_evireform", "--variant"),
                           ("stages.retrieve_cee", "--variant"),
                           ("stages.retrieve_rerank", "--method")):
        shim = importlib.import_module(module)
        assert option in CliRunner().invoke(shim.app, ["--help"]).output
        assert callable(shim.main)
