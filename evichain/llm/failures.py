"""The failure-rate rule of LLM work, shared by the DVC stages and ``evichain run``.

A result made mostly of failed LLM calls (or of the fallbacks that replace them) must not pass
for the method's. Callers write their tables first, so the status rows of a failed run are kept
and a resumed run repeats nothing, then apply the rule:

* :func:`check_failure_rate`: one count against its limit (the param named in the message);
* :func:`failed_questions`: the questions whose trace row records a failed LLM call;
* :func:`llm_failure_counts` and :func:`check_llm_failures`: a retrieval run's failed requests
  (the summary's ``llm_usage``) and failed questions (its trace), both against
  ``llm.max_failure_rate``.

Light on purpose (pandas is imported by the one function that needs it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

LLM_LIMIT_KEY = "llm.max_failure_rate"


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


def failed_questions(trace: pd.DataFrame) -> int:
    """Questions whose trace row records a failed LLM call, by the methods' trace conventions.

    A row counts when ``status`` is ``failed`` or ``partial`` (graph, iterative, listwise
    rerank, expansion), when any ``*_status`` column reads ``llm_<kind>`` (EviReform's
    selection / reformulation / judge, CatRAG's anchoring, the graph filter), or when
    ``llm_failures`` is a non-empty list (CEE). Requests alone understate the damage: a
    question that fails at its first call makes one failed request, an answered one several,
    so a replay with half its questions unanswered can stay under the per-request limit.
    """
    import pandas as pd

    failed = pd.Series(False, index=trace.index)
    if "status" in trace:
        failed |= trace["status"].astype(str).isin(["failed", "partial"])
    for col in (c for c in trace.columns if str(c).endswith("_status")):
        failed |= trace[col].astype(str).str.startswith("llm_")
    if "llm_failures" in trace:
        failed |= trace["llm_failures"].map(lambda v: v is not None and len(v) > 0)
    return int(failed.sum())


def llm_failure_counts(summary: Mapping[str, Any], trace: pd.DataFrame) -> dict[str, int]:
    """A retrieval run's LLM requests and failed requests (``summary["llm_usage"]``), its
    questions and failed questions (:func:`failed_questions`), and, where the trace has a
    ``fallback`` column, the questions answered by a fallback."""
    usage = summary.get("llm_usage") or {}
    counts = {"llm_requests": int(usage.get("requests", 0)),
              "llm_failed_requests": int(usage.get("failures", 0)),
              "questions": len(trace), "failed_questions": failed_questions(trace)}
    if "fallback" in trace:
        counts["fallback_questions"] = int(trace["fallback"].fillna(False).astype(bool).sum())
    return counts


def check_llm_failures(counts: Mapping[str, int], limit: float, *, requests_see: Path | str,
                       questions_see: Path | str) -> None:
    """Fail above ``limit`` (``llm.max_failure_rate``) of failed LLM requests, then of failed
    questions (``counts`` from :func:`llm_failure_counts`)."""
    check_failure_rate(counts["llm_failed_requests"], counts["llm_requests"], limit,
                       key=LLM_LIMIT_KEY, what="LLM requests", see=requests_see)
    check_failure_rate(counts["failed_questions"], counts["questions"], limit,
                       key=LLM_LIMIT_KEY, what="questions", see=questions_see)
