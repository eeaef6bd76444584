"""Answer metrics: normalized exact match and token F1 (EviReform Appendix C.4, DESIGN.md §6).

``normalize(s)``: lower-case; delete every ASCII punctuation character (``string.punctuation``);
delete the whole words ``a``, ``an``, ``the``; collapse runs of whitespace to one space and strip
(the SQuAD / HotpotQA evaluation normalizer, applied in that order).

For a prediction ``p`` and one gold answer ``g`` with token multisets ``P = split(normalize(p))``
and ``A = split(normalize(g))``:

* ``EM(p, g) = 1[normalize(p) = normalize(g)]``.
* ``c = |P ∩ A|`` (multiset intersection, ``collections.Counter``); ``F1(p, g) = 2·prec·rec /
  (prec + rec)`` with ``prec = c/|P|``, ``rec = c/|A|`` when ``c > 0``, else 0.
* Special answers: if ``normalize(p)`` or ``normalize(g)`` is one of ``yes``, ``no``,
  ``noanswer`` and the two normalized strings differ, ``F1 = 0`` (HotpotQA convention).
* ``"unknown"`` (the shared reader's abstention) is an ordinary answer: usually wrong.

A question's score is the maximum over its gold answers (canonical answer first, then aliases).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

import polars as pl

from evichain.metrics.frames import as_polars
from evichain.metrics.retrieval import _as_list

if TYPE_CHECKING:
    import pandas as pd

EXCLUDED_KEY = "excluded_no_answer"
"""The key under which callers pass :func:`qa_frame`'s excluded ids to ``aggregate``
(counted there as ``n_excluded_no_answer``)."""

SPECIAL_ANSWERS: frozenset[str] = frozenset({"yes", "no", "noanswer"})
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    """Lower-case, strip punctuation, drop articles ``a/an/the``, collapse whitespace."""
    text = str(text).lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(pred: str, golds: Iterable[str] | str) -> float:
    """``max_g 1[normalize(pred) = normalize(g)]``; 0.0 when there is no gold answer."""
    p = normalize(pred)
    return max((float(p == normalize(g)) for g in _golds(golds)), default=0.0)


def f1(pred: str, golds: Iterable[str] | str) -> float:
    """``max_g F1(pred, g)`` (token F1 of the module docstring); 0.0 when there is no gold."""
    return max((_f1_single(pred, g) for g in _golds(golds)), default=0.0)


def _f1_single(pred: str, gold: str) -> float:
    """Token F1 against one gold answer, with the yes/no/noanswer mismatch rule."""
    p, g = normalize(pred), normalize(gold)
    if (p in SPECIAL_ANSWERS or g in SPECIAL_ANSWERS) and p != g:
        return 0.0
    p_tok, g_tok = p.split(), g.split()
    common = sum((Counter(p_tok) & Counter(g_tok)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p_tok), common / len(g_tok)
    return 2 * precision * recall / (precision + recall)


def qa_frame(preds: pl.DataFrame | pd.DataFrame,
             questions: pl.DataFrame | pd.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """EM and F1 per question: columns ``question_id``, ``EM``, ``F1``, ``status``, and the
    sorted ids of the questions excluded for having no gold answer (pass them to
    :func:`evichain.metrics.retrieval.aggregate` as ``{EXCLUDED_KEY: ids}``).

    Every question of ``questions`` with at least one gold answer gets a row (sorted by id).
    ``status`` is the prediction's status; a question without a prediction row gets
    ``"missing"``. Any status other than ``"ok"`` scores 0 on both metrics (and is counted by
    :func:`evichain.metrics.retrieval.aggregate` as ``n_failed``). Prediction rows for unknown
    questions are ignored; a repeated prediction ``question_id`` raises ``ValueError``.
    """
    p = as_polars(preds).select(pl.col("question_id").cast(pl.String), "prediction", "status")
    if p["question_id"].is_duplicated().any():
        raise ValueError("prediction table repeats a question_id")
    by_id = {qid: (pred, status) for qid, pred, status in p.iter_rows()}
    q = as_polars(questions).select(pl.col("question_id").cast(pl.String), "answers")
    rows, excluded = [], []
    for qid, answers in q.iter_rows():
        golds = _golds(answers)
        if not golds:
            excluded.append(qid)
            continue
        pred, status = by_id.get(qid, ("", "missing"))
        ok = status == "ok" and isinstance(pred, str)
        em, f = (exact_match(pred, golds), f1(pred, golds)) if ok else (0.0, 0.0)
        rows.append((qid, em, f, str(status)))
    schema = {"question_id": pl.String, "EM": pl.Float64, "F1": pl.Float64, "status": pl.String}
    out = pl.DataFrame(rows, schema=schema, orient="row").sort("question_id")
    return out, sorted(excluded)


def _golds(golds: Iterable[str] | str) -> list[str]:
    """Gold answers as a list of strings (a bare string is one answer; None/NaN dropped)."""
    return [str(g) for g in _as_list(golds) if g is not None and not _is_nan(g)]


def _is_nan(value: object) -> bool:
    return isinstance(value, float) and value != value
