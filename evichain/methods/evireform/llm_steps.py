"""The LLM calls of EviReform's online retrieval, each one structured call of the client.

* :meth:`EviReformLLM.select`: Listing 12 (Step 2, paper §3.5), user data
  ``{"q":…,"c":[{"i":…,"t":…}]}`` minified; ids constrained to the candidates in the sent
  schema; the client check rejects a reply with no candidate id (one repair, then failure).
* :meth:`EviReformLLM.reformulate`: Listing 13 (Step 4, §3.6), data ``{"q":…,"e":[{"id":…,
  "text":…}]}``; at most L queries in the sent schema.
* :meth:`EviReformLLM.gaps`: Listing 16 (rounds > 1, Appendix A.4 Eq. 19).
* :meth:`EviReformLLM.judge`: Listing 15 (reorder control, Appendix A.4).

Every method returns what the model said (unvalidated against retrieval state: the caller
drops invalid ids and counts them) and a :class:`StepUsage` (ok / failure kind, tokens, and
the seconds of the whole step: building the prompt and the call, i.e. the time that
"retrieval excluding LLM calls" leaves out). Tokens of a cache hit are those stored with the response, so traces do not depend
on the cache state.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

from evichain.llm import LLMClient, LLMSuccess
from evichain.llm.prompting import narrowed
from evichain.llm.types import Prompt, result_tokens
from evichain.llm.usage import StepUsage
from evichain.methods.evireform.params import EviReformParams
from evichain.methods.evireform.prompts import (GAPS, JUDGE, REFORMULATE, ids_check, minified,
                                                selection_prompt)

__all__ = ["EviReformLLM", "StepUsage", "tokens_used"]


def tokens_used(client: LLMClient, result: Any) -> tuple[int, int]:
    """(prompt, completion) tokens of a call; for a cache hit, those stored with it."""
    return result_tokens(result)


def _timed(method: Callable[..., Any]) -> Callable[..., Any]:
    """Set the returned usage's ``seconds`` (wall) and ``cpu_seconds`` (this thread's CPU
    time) to the duration of the whole step."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start, cpu = time.perf_counter(), time.thread_time()
        out = method(*args, **kwargs)
        out[-1].seconds = time.perf_counter() - start
        out[-1].cpu_seconds = time.thread_time() - cpu
        return out

    return wrapper


class EviReformLLM:
    """Listings 12, 13, 15, 16 through one :class:`LLMClient`."""

    def __init__(self, client: LLMClient, params: EviReformParams) -> None:
        self.client = client
        self.params = params

    def _call(self, prompt: Prompt[Any], check: Any = None, **variables: Any) -> tuple[Any, StepUsage]:
        result = self.client.call(prompt, check=check, **variables)
        pt, ct = tokens_used(self.client, result)
        usage = StepUsage(ok=result.ok, kind="" if result.ok else result.kind, prompt_tokens=pt,
                          completion_tokens=ct, cached=bool(getattr(result, "cached", False)))
        return (result.value if isinstance(result, LLMSuccess) else None), usage

    @_timed
    def select(self, question: str, candidates: Sequence[tuple[int, str]]) -> tuple[list[int], StepUsage]:
        """Listing 12: proposition ids chosen from ``candidates`` ((id, text) pairs)."""
        ids = [i for i, _ in candidates]
        prompt = narrowed(selection_prompt(len(candidates), self.params.max_selected),
                          "selected_proposition_ids", enum=ids, max_items=self.params.max_selected)
        data = minified({"q": question, "c": [{"i": i, "t": t} for i, t in candidates]})
        value, usage = self._call(prompt, ids_check(set(ids), "selected_proposition_ids"), data=data)
        return (list(value.selected_proposition_ids) if value else []), usage

    @_timed
    def reformulate(self, question: str, evidence: Sequence[tuple[int, str]]) -> tuple[list[str], StepUsage]:
        """Listing 13: residual queries from (q, E_q)."""
        prompt = narrowed(REFORMULATE, "queries", max_items=self.params.max_residual_queries)
        data = minified({"q": question, "e": [{"id": i, "text": t} for i, t in evidence]})
        value, usage = self._call(prompt, data=data)
        return (list(value.queries) if value else []), usage

    @_timed
    def gaps(self, round_no: int, question: str, evidence: Sequence[tuple[int, str]]
             ) -> tuple[bool, list[str], StepUsage]:
        """Listing 16: (sufficient, retrieval queries of the gaps)."""
        prompt = narrowed(GAPS, "gaps", max_items=self.params.max_residual_queries)
        data = minified({"round": round_no, "q": question,
                         "e": [{"id": i, "text": t} for i, t in evidence]})
        value, usage = self._call(prompt, data=data)
        if value is None:
            return False, [], usage
        return bool(value.sufficient), [g.retrieval_query for g in value.gaps], usage

    @_timed
    def judge(self, question: str, evidence: Sequence[tuple[int, str]],
              pool: Sequence[tuple[int, str]]) -> tuple[list[int], StepUsage]:
        """Listing 15: the pool's ids from most to least useful."""
        ids = [i for i, _ in pool]
        prompt = narrowed(JUDGE, "ordered_doc_ids", enum=ids)
        data = minified({"q": question, "e": [{"id": i, "text": t} for i, t in evidence],
                         "c": [{"id": i, "text": t} for i, t in pool]})
        value, usage = self._call(prompt, ids_check(set(ids), "ordered_doc_ids"), data=data)
        return (list(value.ordered_doc_ids) if value else []), usage
