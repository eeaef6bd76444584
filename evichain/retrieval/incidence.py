"""The proposition index tables shared by the proposition-based retrievers (EviReform, PropRAG,
GeAR, LLM-free OpenIE): propositions in a deterministic order and the binary
proposition–entity incidence A (M × N_e, scipy CSR).

Propositions are ordered by stored passage order, then by ordinal, so every structure built
from the same tables is identical.

Also the small sparse-matrix helpers that the proposition- and entity-graph methods share:
binary incidence matrices (:func:`binary_csr`, :func:`binarize`) and the diagonal
pseudo-inverse of a degree vector (:func:`pinv_diag`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import polars as pl
import scipy.sparse as sp

if TYPE_CHECKING:
    import pandas as pd

Table = TypeVar("Table", pl.DataFrame, "pd.DataFrame")
"""A table of the index (polars, or pandas from the methods that read theirs with pandas)."""


def order_propositions(props: Table, passage_ids: list[str]) -> Table:
    """Propositions of known passages sorted by (stored passage order, ordinal), where the
    ordinal is the integer after the last ``#`` of ``prop_id``; returned as the type given
    (pandas with a fresh 0..M−1 index). A proposition of an unknown passage is a ValueError."""
    rank = {pid: i for i, pid in enumerate(passage_ids)}
    pids = props["passage_id"].to_list()
    unknown = sorted(set(pids) - set(rank))
    if unknown:
        raise ValueError(f"{len(unknown)} propositions' passages are not in the corpus, "
                         f"e.g. {unknown[:3]}: rebuild the index for this corpus")
    ordinal = np.array([int(p.rsplit("#", 1)[1]) for p in props["prop_id"].to_list()], dtype=np.int64)
    order = np.lexsort((ordinal, np.array([rank[p] for p in pids], dtype=np.int64)))
    if isinstance(props, pl.DataFrame):
        return props[order]
    return props.iloc[order].reset_index(drop=True)


def incidence_matrix(prop_ids: list[str], entity_ids: list[str],
                     incidence: pl.DataFrame | pd.DataFrame) -> sp.csr_matrix:
    """Binary A (M × N_e) from (prop_id, entity_id) rows: A[i, j] = 1 when proposition
    ``prop_ids[i]`` mentions entity ``entity_ids[j]``; rows of unknown ids are errors."""
    prow = {p: i for i, p in enumerate(prop_ids)}
    ecol = {e: j for j, e in enumerate(entity_ids)}
    rows = [prow.get(p) for p in incidence["prop_id"].to_list()]
    cols = [ecol.get(e) for e in incidence["entity_id"].to_list()]
    if None in rows or None in cols:
        raise ValueError("incidence rows reference unknown propositions or entities: "
                         "re-run canonicalize_entities after extract_propositions")
    return binary_csr(np.asarray(rows, dtype=int), np.asarray(cols, dtype=int),
                      (len(prop_ids), len(entity_ids)))


def binary_csr(rows: np.ndarray | Sequence[int], cols: np.ndarray | Sequence[int],
               shape: tuple[int, int]) -> sp.csr_matrix:
    """The binary float64 CSR matrix B of ``shape`` with B[r, c] = 1 for every given
    (``rows[k]``, ``cols[k]``) and 0 elsewhere: a pair given several times counts once."""
    B = sp.csr_matrix((np.ones(len(rows), dtype=np.float64), (rows, cols)), shape=shape)
    B.sum_duplicates()
    B.data[:] = 1.0
    return B


def binarize(matrix: sp.spmatrix) -> sp.csr_matrix:
    """``matrix`` as binary float64 CSR: duplicates summed, then every stored entry set to 1.

    Like ``scipy.sparse.csr_matrix(matrix, dtype=np.float64)``, the result shares its arrays
    with a float64 CSR ``matrix`` (which is then binarised in place)."""
    B = sp.csr_matrix(matrix, dtype=np.float64)
    B.sum_duplicates()
    B.data[:] = 1.0
    return B


def pinv_diag(values: np.ndarray) -> np.ndarray:
    """Pseudo-inverse of the diagonal matrix diag(``values``), as a vector: 1/x where x > 0,
    else 0 (a zero degree receives and transfers no mass; EviReform Appendix C.1)."""
    values = np.asarray(values, dtype=np.float64)
    out = np.zeros_like(values)
    np.divide(1.0, values, out=out, where=values > 0)
    return out
