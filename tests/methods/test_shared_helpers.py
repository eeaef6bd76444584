"""The shared helpers that methods and stages use instead of repeating code: data prompts and
sent schemas (``evichain/llm/prompting.py``), binary incidences and degree pseudo-inverses
(``evichain/retrieval/incidence.py``), params validators and interval types
(``evichain/params_base.py``), the iterative baselines' base class and the tuning stages' body."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from pydantic import BaseModel, ValidationError

from evichain.llm.prompting import DATA_USER, data_prompt, narrowed, with_sent_schema
from evichain.llm.types import Prompt
from evichain.methods.evireform import propagation
from evichain.methods.iterative.common import (Episode, Exploration, IterativeBaseline, Passages,
                                               Searcher)
from evichain.params_base import (OpenUnitInterval, Section, UnitInterval, known_names,
                                  only_known)
from evichain.retrieval import incidence
from evichain.retrieval.incidence import binarize, binary_csr, pinv_diag


class _Reply(BaseModel):
    ids: list[int]


def test_data_prompt_is_the_plain_prompt_with_data_as_user_message() -> None:
    p = data_prompt("x.step", "Do it.", _Reply, version="3")
    assert p == Prompt(name="x.step", version="3", system="Do it.", user="$data", schema=_Reply)
    assert DATA_USER == "$data" and data_prompt("x.a", "s", _Reply).version == "1"
    assert p.messages(data="{}") == [{"role": "system", "content": "Do it."},
                                     {"role": "user", "content": "{}"}]


def test_with_sent_schema_keeps_validation_and_narrowed_uses_it() -> None:
    p = data_prompt("x.step", "Keep $k.", _Reply)
    sent = with_sent_schema(p, {"b": 1, "a": 2}, system="Keep 2.")
    assert (sent.name, sent.version, sent.user, sent.schema) == (p.name, p.version, p.user, _Reply)
    assert sent.system == "Keep 2." and with_sent_schema(p, {}).system == "Keep $k."
    assert sent.sent_schema == json.dumps({"a": 2, "b": 1}) and sent.json_schema() == {"a": 2, "b": 1}
    schema = narrowed(p, "ids", enum=[3, 5], max_items=1).json_schema()
    assert schema["properties"]["ids"]["items"] == {"type": "integer", "enum": [3, 5]}
    assert schema["properties"]["ids"]["maxItems"] == 1


def test_binary_csr_counts_a_pair_once() -> None:
    B = binary_csr(np.array([0, 0, 1, 2]), np.array([1, 1, 0, 1]), (3, 2))
    assert B.dtype == np.float64 and B.has_canonical_format
    assert B.toarray().tolist() == [[0, 1], [1, 0], [0, 1]]
    assert binary_csr([], [], (2, 2)).nnz == 0


def test_binarize_sums_duplicates_then_sets_ones() -> None:
    coo = sp.coo_matrix((np.array([2.0, 3.0, 0.5]), (np.array([0, 0, 1]), np.array([1, 1, 0]))),
                        shape=(2, 2))
    B = binarize(coo)
    assert sp.isspmatrix_csr(B) and B.dtype == np.float64
    assert B.toarray().tolist() == [[0, 1], [1, 0]]


def test_pinv_diag_zero_for_non_positive_and_shared_with_propagation() -> None:
    assert pinv_diag(np.array([0.0, 4.0, -1.0])).tolist() == [0.0, 0.25, 0.0]
    assert propagation.pinv_diag is incidence.pinv_diag


def test_incidence_matrix_is_binary() -> None:
    rows = pd.DataFrame({"prop_id": ["p1", "p1", "p2"], "entity_id": ["e2", "e2", "e1"]})
    A = incidence.incidence_matrix(["p1", "p2"], ["e1", "e2"], rows)
    assert A.toarray().tolist() == [[0, 1], [1, 0]]


class _Block(Section):
    names: list[str] = []
    by_name: dict[str, int] = {}
    rate: UnitInterval = 0.5
    damping: OpenUnitInterval = 0.5

    _known_names = known_names("names", ("a", "b"), "name")
    _known_keys = known_names("by_name", ("a", "b"), "name")


def test_known_names_checks_lists_and_dict_keys_with_only_knowns_message() -> None:
    assert _Block(names=["b"], by_name={"a": 1}).names == ["b"]
    for field, value in (("names", ["c", "a", "d"]), ("by_name", {"c": 1, "a": 2, "d": 3})):
        with pytest.raises(ValidationError) as err:
            _Block(**{field: value})
        with pytest.raises(ValueError) as expected:
            only_known(["c", "a", "d"], ["a", "b"], "name")
        assert err.value.errors()[0]["loc"] == (field,)
        assert err.value.errors()[0]["msg"] == f"Value error, {expected.value}"


@pytest.mark.parametrize(("field", "ok", "bad"), [("rate", (0.0, 1.0), (-0.1, 1.1)),
                                                  ("damping", (0.01, 0.99), (0.0, 1.0))])
def test_interval_types(field: str, ok: tuple[float, float], bad: tuple[float, float]) -> None:
    for value in ok:
        assert getattr(_Block(**{field: value}), field) == value
    for value in bad:
        with pytest.raises(ValidationError):
            _Block(**{field: value})
    schema = _Block.model_json_schema()["properties"]
    assert (schema["rate"]["minimum"], schema["rate"]["maximum"]) == (0.0, 1.0)
    assert (schema["damping"]["exclusiveMinimum"], schema["damping"]["exclusiveMaximum"]) == (0.0, 1.0)


class _Rows:
    def search(self, query: str, k: int, exclude: Any = ()) -> list[tuple[int, float]]:
        return [(1, 1.0), (0, 0.5)][:k]


class _OneHop(IterativeBaseline[int]):
    name = "one_hop"

    def explore(self, ep: Episode) -> Exploration:
        rows = ep.retrieve(self.searcher, ep.question, self.params)
        ep.add(rows)
        ep.stop("step_limit")
        return Exploration([(j, self.passages.texts[j]) for j in rows], {"k": self.params},
                           ranking=rows[::-1])


def test_iterative_baseline_runs_explore_and_finishes() -> None:
    searcher: Searcher = _Rows()
    passages = Passages(["d0", "d1"], ["T0", "T1"], ["x0", "x1"])
    out = _OneHop(passages, searcher, 2).run(client=None, question_id="q", question="Q?")  # type: ignore[arg-type]
    assert out.trace["method"] == "one_hop" and out.trace["k"] == 2
    assert out.trace["queries"] == ["Q?"] and out.trace["evidence_ids"] == ["d1", "d0"]
    assert [r[2] for r in out.run] == ["d0", "d1"]          # the explicit ranking, not first-seen
    assert [e["text"] for e in out.evidence] == ["x1", "x0"]


def test_tune_and_finish_refuses_a_reported_sample(tmp_path: Path) -> None:
    from stages._tuning import tune_and_finish

    params_file = tmp_path / "params.yaml"
    params_file.write_text("tuning_datasets: []\n")

    def tune(paths: Any, params: Any) -> Any:
        raise AssertionError("tuned a reported sample")

    with pytest.raises(ValueError, match="tuning_datasets"):
        tune_and_finish("cee", "2wiki_s", params_file, tune, lambda out: {})
