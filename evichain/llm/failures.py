"""The failure-rate rule of LLM work, shared by the DVC stages and ``evichain run``.

A result made mostly of failed LLM calls (or of the fallbacks that replace them) must not pass
for the method's. Callers write their tables first, so the status rows of a failed run are kept
and a resumed run repeats nothing, then apply the rule:

* :func:`check_failure_rate`: one count against its limit (the param named in the message);
* :func:`failed_questions`: the questions whose trace row records a failed LLM call;
* :func:`llm_failure_counts` and :func:`check_llm_failures`: a retrieval run's failed requests
  (the summary's ``llm_usage``) and failed questions (its trace), both against
  ``llm.max_failure_rate``.

The rule runs on polars. Every caller still passes the pandas trace its flow returns
(``stages/_common.py``, ``evichain/methods/fused/method.py``, ``flows/user.py``), so a pandas
trace is converted here, column by column, to the types a polars trace has (:func:`trace_flags`);
polars and pandas are imported by the functions that need them, so importing this module stays
light.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl

LLM_LIMIT_KEY = "llm.max_failure_rate"
FAILED_STATUSES: tuple[str, ...] = ("failed", "partial")


class FailureRateExceeded(RuntimeError):
    """More than the allowed fraction of the work failed; the message names the counts, the
    param and the file to look at."""


def check_failure_rate(failed: int, total: int, limit: float, *, key: str, what: str,
                       see: Path | str) -> None:
    """Fail when ``failed / total > limit`` (the ``key`` param); call it *after* writing the
    tables, so the status rows of a failed run are kept and a resumed run repeats nothing.
    """
    if failed > limit * max(1, total):
        raise FailureRateExceeded(f"{failed} of {total} {what} failed "
                                  f"({failed / max(1, total):.1%} > {key} {limit:.1%}); see {see}")


def _is_status(name: str) -> bool:
    """A trace column the rule reads as a status: ``status`` or ``*_status``."""
    return name == "status" or name.endswith("_status")


def trace_flags(trace: pl.DataFrame | pd.DataFrame) -> dict[str, pl.Series]:
    """The columns of ``trace`` the rule reads, by name, as polars: every ``status``/``*_status``
    column as ``String``, ``llm_failures`` as ``List(String)``, ``fallback`` as ``Boolean``.

    A polars trace is cast (a string ``fallback``, CatRAG's, is true when non-empty; a NaN is
    null). A pandas trace is converted as the pandas rule read it: a status is ``str(value)``
    (``astype(str)``: ``None`` reads "None"), ``llm_failures`` keeps ``None`` and lists (or
    arrays) of items, ``fallback`` is ``bool(value)`` ("" false) with a missing value (``None``,
    NaN, ``pd.NA``) null, as ``fillna(False).astype(bool)`` read it.
    """
    import polars as pl

    if isinstance(trace, pl.DataFrame):
        return {c: _cast(trace[c]) for c in trace.columns if _read_by_rule(c)}
    return {str(c): _from_pandas(str(c), trace[c].tolist()) for c in trace.columns
            if _read_by_rule(str(c))}


def _read_by_rule(name: str) -> bool:
    """Whether the rule reads column ``name``."""
    return _is_status(name) or name in ("llm_failures", "fallback")


def _cast(column: pl.Series) -> pl.Series:
    """A polars trace column in the rule's type (see :func:`trace_flags`)."""
    import polars as pl

    if _is_status(column.name):
        return column.cast(pl.String)
    if column.name == "llm_failures":
        return column.cast(pl.List(pl.String))
    if column.dtype == pl.String:  # e.g. CatRAG's fallback: the fallback's name, "" for none
        return column.str.len_chars() > 0
    if column.dtype.is_float():
        column = column.fill_nan(None)
    return column.cast(pl.Boolean)


def _from_pandas(name: str, values: list[Any]) -> pl.Series:
    """A pandas trace column's values in the rule's type (see :func:`trace_flags`)."""
    import pandas as pd
    import polars as pl

    if _is_status(name):
        return pl.Series(name, [str(v) for v in values], dtype=pl.String)
    if name == "llm_failures":
        return pl.Series(name, [None if v is None else [str(x) for x in v] for v in values],
                         dtype=pl.List(pl.String))
    return pl.Series(name, [None if pd.api.types.is_scalar(v) and pd.isna(v) else bool(v)
                            for v in values], dtype=pl.Boolean)


def failed_questions(trace: pl.DataFrame | pd.DataFrame) -> int:
    """Questions whose trace row records a failed LLM call, by the methods' trace conventions.

    A row counts when ``status`` is ``failed`` or ``partial`` (graph, iterative, listwise
    rerank, expansion), when any ``*_status`` column reads ``llm_<kind>`` (EviReform's
    selection / reformulation / judge, CatRAG's anchoring, the graph filter), or when
    ``llm_failures`` is a non-empty list (CEE). Requests alone understate the damage: a
    question that fails at its first call makes one failed request, an answered one several,
    so a replay with half its questions unanswered can stay under the per-request limit.
    """
    import polars as pl

    failed = pl.repeat(False, len(trace), eager=True)
    for name, column in trace_flags(trace).items():
        if name == "status":
            failed |= column.is_in(FAILED_STATUSES).fill_null(False)
        elif name.endswith("_status"):
            failed |= column.str.starts_with("llm_").fill_null(False)
        elif name == "llm_failures":
            failed |= (column.list.len() > 0).fill_null(False)
    return int(failed.sum())


def llm_failure_counts(summary: Mapping[str, Any], trace: pl.DataFrame | pd.DataFrame) -> dict[str, int]:
    """A retrieval run's LLM requests and failed requests (``summary["llm_usage"]``), its
    questions and failed questions (:func:`failed_questions`), and, where the trace has a
    ``fallback`` column, the questions answered by a fallback (a missing value counts as not)."""
    usage = summary.get("llm_usage") or {}
    counts = {"llm_requests": int(usage.get("requests", 0)),
              "llm_failed_requests": int(usage.get("failures", 0)),
              "questions": len(trace), "failed_questions": failed_questions(trace)}
    if "fallback" in trace.columns:
        counts["fallback_questions"] = int(trace_flags(trace)["fallback"].fill_null(False).sum())
    return counts


def check_llm_failures(counts: Mapping[str, int], limit: float, *, requests_see: Path | str,
                       questions_see: Path | str) -> None:
    """Fail above ``limit`` (``llm.max_failure_rate``) of failed LLM requests, then of failed
    questions (``counts`` from :func:`llm_failure_counts`)."""
    check_failure_rate(counts["llm_failed_requests"], counts["llm_requests"], limit,
                       key=LLM_LIMIT_KEY, what="LLM requests", see=requests_see)
    check_failure_rate(counts["failed_questions"], counts["questions"], limit,
                       key=LLM_LIMIT_KEY, what="questions", see=questions_see)
