"""The proposition index tables shared by the proposition-based retrievers (EviReform, PropRAG,
GeAR, LLM-free OpenIE): propositions in a deterministic order and the binary
proposition–entity incidence A (M × N_e, scipy CSR).

Propositions are ordered by stored passage order, then by ordinal, so every structure built
from the same tables is identical.
"""

from __future__ import annotations

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
    data = np.ones(len(incidence), dtype=np.float64)
    A = sp.csr_matrix((data, (rows.to_numpy(int), cols.to_numpy(int))),
                      shape=(len(prop_ids), len(entity_ids)))
    A.sum_duplicates()
    A.data[:] = 1.0
    return A
