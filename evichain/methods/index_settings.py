"""A user's corpus indexed as one of the benchmark datasets is: ``evichain run --index-like``.

Three index settings of ``params.yaml`` have per-dataset values, set for the datasets whose
corpus the LLM cannot index on this machine in reasonable time:

* ``evireform.index.extractor_by_dataset``: ``sentences`` (LLM-free sentence propositions)
  instead of ``evireform.index.extractor`` (LLM extraction) for the named datasets;
* ``graph.openie_by_dataset``: ``propositions`` (triples from the proposition index, no LLM)
  instead of ``graph.openie``;
* ``cee.facets.restricted``: the datasets whose CEE facets are generated for fewer targets and
  pairs (``facet_scope``, ``facet_scope_n``, ``max_pairs_per_passage`` of that block).

A user's corpus is named ``user``, which none of these lists names, so it gets the settings as
written. :func:`settings_like` returns params whose written settings are those of a named
dataset, so every reader (the index flows, :meth:`Method.tables`, the estimate) sees them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evichain.params_base import DATASETS, ParamsError

if TYPE_CHECKING:
    from evichain.config import Params


def check_dataset(dataset: str) -> str:
    """``dataset`` unchanged, or a :class:`ParamsError` naming the valid choices."""
    if dataset not in DATASETS:
        raise ParamsError(f"--index-like {dataset!r} is not a dataset; choose one of: "
                          f"{', '.join(DATASETS)}")
    return dataset


def settings_like(params: Params, dataset: str) -> Params:
    """``params`` with the index settings ``dataset`` is built with written as the settings of
    every dataset: ``evireform.index.extractor`` = its ``extractor_by_dataset`` value (if any),
    ``graph.openie`` = its ``openie_by_dataset`` value, ``cee.facets`` = the restricted settings
    when ``cee.facets.restricted.datasets`` names it; the per-dataset lists are emptied so
    nothing else applies."""
    check_dataset(dataset)
    ev, graph, cee = params.evireform, params.graph, params.cee
    index = ev.index.for_dataset(dataset).model_copy(update={"extractor_by_dataset": {}})
    facets = cee.facets.for_dataset(dataset)
    facets = facets.model_copy(update={"restricted": facets.restricted.model_copy(update={"datasets": []})})
    return params.model_copy(update={
        "evireform": ev.model_copy(update={"index": index}),
        "graph": graph.model_copy(update={"openie": graph.openie_for(dataset), "openie_by_dataset": {}}),
        "cee": cee.model_copy(update={"facets": facets}),
    })


def describe(params: Params, dataset: str) -> str:
    """One line: the index settings ``dataset`` uses under ``params``, e.g. ``index settings as
    for musique: evireform.index.extractor sentences, graph.openie propositions, cee.facets
    restricted (facet_scope reachable, facet_scope_n 3, max_pairs_per_passage 1)``."""
    like = settings_like(params, dataset)
    facets = like.cee.facets
    restricted = params.cee.facets.is_restricted(dataset)
    facet_text = (f"restricted (facet_scope {facets.facet_scope}, facet_scope_n {facets.facet_scope_n}, "
                  f"max_pairs_per_passage {facets.max_pairs_per_passage})" if restricted
                  else "as written")
    return (f"index settings as for {dataset}: evireform.index.extractor {like.evireform.index.extractor}, "
            f"graph.openie {like.graph.openie}, cee.facets {facet_text}")
