"""The proposition order and the incidence matrix take polars or pandas index tables."""

from __future__ import annotations

import pandas as pd
import polars as pl
import pytest

from evichain.retrieval.incidence import incidence_matrix, order_propositions

PROPS = {"prop_id": ["b#10", "a#2", "b#9", "a#1"], "passage_id": ["b", "a", "b", "a"],
         "text": ["4", "2", "3", "1"]}


def test_order_is_passage_order_then_numeric_ordinal_in_the_type_given() -> None:
    ordered = order_propositions(pl.DataFrame(PROPS), ["b", "a"])
    assert isinstance(ordered, pl.DataFrame)
    assert ordered["prop_id"].to_list() == ["b#9", "b#10", "a#1", "a#2"]  # 9 < 10: numeric
    legacy = order_propositions(pd.DataFrame(PROPS), ["b", "a"])
    assert isinstance(legacy, pd.DataFrame) and list(legacy.index) == [0, 1, 2, 3]
    assert legacy["prop_id"].tolist() == ordered["prop_id"].to_list()
    with pytest.raises(ValueError, match="not in the corpus"):
        order_propositions(pl.DataFrame(PROPS), ["a"])


def test_incidence_matrix_from_a_polars_table_and_unknown_ids() -> None:
    rows = pl.DataFrame({"prop_id": ["p1", "p1", "p2"], "entity_id": ["e2", "e2", "e1"]})
    assert incidence_matrix(["p1", "p2"], ["e1", "e2"], rows).toarray().tolist() == [[0, 1], [1, 0]]
    with pytest.raises(ValueError, match="unknown propositions or entities"):
        incidence_matrix(["p1"], ["e1", "e2"], rows)
