"""``--index-like <dataset>``: a user's corpus indexed with a benchmark dataset's per-dataset
index settings (issue 61)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evichain.config import ParamsError, load_params
from evichain.methods.base import get_method
from evichain.methods.index_settings import check_dataset, describe, settings_like
from evichain.params_base import DATASETS

ROOT = Path(__file__).resolve().parents[2]


def test_musique_gets_its_llm_free_settings_from_params_yaml() -> None:
    params = load_params(ROOT / "params.yaml")
    like = settings_like(params, "musique")
    assert params.evireform.index.extractor == "llm" and params.graph.openie == "llm"
    assert like.evireform.index.extractor == "sentences"
    assert like.graph.openie == "propositions"
    assert like.cee.facets.facet_scope == "reachable"
    assert like.cee.facets.max_pairs_per_passage == params.cee.facets.restricted.max_pairs_per_passage
    # what the run reads follows: HippoRAG 2 reads the proposition index, not LLM triples
    assert get_method("hipporag2").tables(like) == ("propositions", "entities", "incidence")
    assert get_method("hipporag2").tables(params) == ("triples",)
    # nothing per-dataset is left to apply to the run's own dataset name
    assert like.evireform.index.extractor_by_dataset == {} and like.graph.openie_by_dataset == {}
    assert like.cee.facets.restricted.datasets == []


def test_a_dataset_without_overrides_keeps_the_settings_as_written() -> None:
    params = load_params(ROOT / "params.yaml")
    like = settings_like(params, "demo")
    assert like.evireform.index.extractor == params.evireform.index.extractor
    assert like.graph.openie == params.graph.openie
    assert like.cee.facets.facet_scope == params.cee.facets.facet_scope
    assert describe(params, "demo") == ("index settings as for demo: evireform.index.extractor llm, "
                                        "graph.openie llm, cee.facets as written")


def test_unknown_dataset_names_the_choices() -> None:
    with pytest.raises(ParamsError) as info:
        check_dataset("musiqe")
    assert str(info.value) == f"--index-like 'musiqe' is not a dataset; choose one of: {', '.join(DATASETS)}"
