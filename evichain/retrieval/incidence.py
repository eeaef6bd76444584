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

import numpy as np
import pandas as pd
import scipy.sparse as sp


def order_propositions(props: pd.DataFrame, passage_ids: list[str]) -> pd.DataFrame:
    """Propositions of known passages, in stored passage order then ordinal."""
    rank = {pid: i for i, pid in enumerate(passage_ids)}
    unknown = sorted(set(props["passage_id"]) - set(rank))
    if unknown:
        raise ValueError(f"{len(unknown)} propositions' passages are not in the corpus, "
                         f"e.g. {unknown[:3]}: rebuild the index for this corpus")
    ordinal = props["prop_id"].str.rsplit("#", n=1).str[1].astype(int)
    keys = pd.DataFrame({"p": props["passage_id"].map(rank), "o": ordinal})
    order = np.lexsort((keys["o"].to_numpy(), keys["p"].to_numpy()))
    return props.iloc[order].reset_index(drop=True)


def incidence_matrix(prop_ids: list[str], entity_ids: list[str], incidence: pd.DataFrame
                     ) -> sp.csr_matrix:
    """Binary A (M × N_e) from (prop_id, entity_id) rows; rows of unknown ids are errors."""
    prow = {p: i for i, p in enumerate(prop_ids)}
    ecol = {e: j for j, e in enumerate(entity_ids)}
    rows = incidence["prop_id"].map(prow)
    cols = incidence["entity_id"].map(ecol)
    if rows.isna().any() or cols.isna().any():
        raise ValueError("incidence rows reference unknown propositions or entities: "
                         "re-run canonicalize_entities after extract_propositions")
    return binary_csr(rows.to_numpy(int), cols.to_numpy(int), (len(prop_ids), len(entity_ids)))


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
