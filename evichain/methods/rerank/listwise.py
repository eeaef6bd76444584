"""Listwise LLM reranking of the dense pool (EviReform §4.1, Table C.2, prompt Listing 14).

One structured call per question: the instructions of Listing 14 (verbatim, spaces restored) are
the system message; the data is one minified JSON object ``{"q": question, "c": [{"id": k,
"text": …}]}`` with short ids k = 1..n in pool (dense) order. The reply ``{"ordered_doc_ids":
[…]}`` is repaired, never trusted (:func:`repair_order`): ids given as strings ("3", "[3]",
"doc3") are read as integers (``coerced``); ids outside 1..n are dropped (``unknown``); a repeat
of an id already placed is dropped (``duplicate``); pool passages the model left out are appended
in their pool order (``missing``). No passage is ever dropped. Each repair kind is counted in
the trace. A reply with no valid id at all gets the client's one repair turn, then is a
recorded failure; on failure the pool keeps its dense order (``on_failure: dense_order``,
``fallback=True``) or the question gets no run rows (``on_failure: empty``).

Context: 40 passages must fit the local model's 8,192-token context with the instructions and
the answer, so each candidate text is cut to ``passage_words`` words (title kept), and the cap
is lowered (×``shrink``) while the rendered prompt exceeds ``max_prompt_tokens`` tokens of the
client's tokenizer (:func:`fit_payload`). The cap used is recorded per question.
The sent JSON schema constrains the ids to the enum 1..n (grammar-constrained decoding cannot
invent an id) while validation stays lenient so that repairs can be counted.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from evichain.llm import LLMClient, LLMSuccess
from evichain.llm.types import Prompt, quote_json, result_tokens
from evichain.llm.prompting import NarrowedPrompt
from evichain.methods.rerank.params import ListwiseParams
from evichain.methods.rerank.pool import Candidate

LISTING_14 = ("Rerank the supplied candidate paragraphs for the multi-hop question. Rank paragraphs "
              "by how useful they are together for recovering all evidence needed to answer the "
              "question, not merely by surface similarity. Use only the candidate paragraph texts. "
              'Return only JSON of the form {"ordered_doc_ids": [...]}, listing all supplied '
              "candidate IDs exactly once from most to least useful. Do not answer the question.")


class ListwiseResponse(BaseModel):
    """Listing 14 reply; ids may come back as integers or strings (repaired, counted)."""

    model_config = ConfigDict(extra="ignore")
    ordered_doc_ids: list[int | str]


LISTWISE = Prompt(name="rerank.listwise", version="1", system=LISTING_14, user="$data",
                  schema=ListwiseResponse)

_ID_IN_TEXT = re.compile(r"^\D{0,8}?(\d+)\D{0,2}$")


def listwise_prompt(n: int) -> Prompt[Any]:
    """Listing 14 with the sent schema narrowed to ids 1..n (``minItems = maxItems = n``
    is not imposed: the model may still omit ids, which :func:`repair_order` appends)."""
    schema = {"type": "object", "additionalProperties": False, "required": ["ordered_doc_ids"],
              "properties": {"ordered_doc_ids": {"type": "array", "maxItems": n,
                                                 "items": {"type": "integer",
                                                           "enum": list(range(1, n + 1))}}}}
    return NarrowedPrompt(name=LISTWISE.name, version=LISTWISE.version, system=LISTWISE.system,
                          user=LISTWISE.user, schema=ListwiseResponse,
                          sent_schema=json.dumps(schema, sort_keys=True))


def coerce_id(value: int | str) -> tuple[int | None, bool]:
    """(integer id or None, whether a string had to be converted)."""
    if isinstance(value, bool):
        return None, False
    if isinstance(value, int):
        return value, False
    match = _ID_IN_TEXT.match(str(value).strip())
    return (int(match.group(1)), True) if match else (None, True)


def any_valid_check(n: int) -> Callable[[Any], None]:
    """Client check: at least one returned id must be a pool id (else repair, then failure)."""

    def check(value: Any) -> None:
        if not any(1 <= (coerce_id(v)[0] or 0) <= n for v in value.ordered_doc_ids):
            raise ValueError(f"none of the {len(value.ordered_doc_ids)} returned ids is a "
                             f"supplied candidate id (1..{n})")

    return check


@dataclass
class RepairCounts:
    """How a returned order was repaired."""

    coerced: int = 0
    unknown: int = 0
    duplicate: int = 0
    missing: int = 0


def repair_order(returned: Sequence[int | str], n: int) -> tuple[list[int], RepairCounts]:
    """A permutation of 0..n−1 from the model's ids (1..n): first occurrences of valid ids in
    the model's order, then the missing positions in pool order (module docstring)."""
    counts = RepairCounts()
    order: list[int] = []
    placed: set[int] = set()
    for value in returned:
        k, converted = coerce_id(value)
        counts.coerced += int(converted and k is not None)
        if k is None or not 1 <= k <= n:
            counts.unknown += 1
        elif k - 1 in placed:
            counts.duplicate += 1
        else:
            placed.add(k - 1)
            order.append(k - 1)
    rest = [i for i in range(n) if i not in placed]
    counts.missing = len(rest)
    return order + rest, counts


def cap_words(text: str, words: int) -> str:
    """The first ``words`` whitespace-separated words of ``text``."""
    parts = text.split()
    return " ".join(parts[:words])


def pool_payload(question: str, pool: Sequence[Candidate], words: int) -> str:
    """The user message: ``{"q":…,"c":[{"id":k,"text":"title\\ncapped text"}]}`` minified."""
    return quote_json({"q": question, "c": [{"id": k, "text": f"{c.title}\n{cap_words(c.text, words)}"}
                                           for k, c in enumerate(pool, start=1)]})


def fit_payload(question: str, pool: Sequence[Candidate], params: ListwiseParams,
                count: Callable[[str], int]) -> tuple[str, int, int]:
    """(payload, words per passage, prompt tokens): the largest cap ≤ ``passage_words`` (lowered
    by ×``shrink``, not below ``min_passage_words``) whose system + user text fits
    ``max_prompt_tokens``; at the floor the payload is used as it is (tokens recorded)."""
    words = params.passage_words
    while True:
        payload = pool_payload(question, pool, words)
        tokens = count(LISTING_14 + "\n" + payload)
        if tokens <= params.max_prompt_tokens or words <= params.min_passage_words:
            return payload, words, tokens
        words = max(params.min_passage_words, int(words * params.shrink))


@dataclass
class ListwiseResult:
    """The reordered pool of one question and what happened on the way."""

    order: list[str]
    status: str = "ok"
    error_kind: str = ""
    error: str = ""
    fallback: bool = False
    counts: RepairCounts = field(default_factory=RepairCounts)
    returned_ids: list[str] = field(default_factory=list)
    passage_words: int = 0
    prompt_tokens_estimate: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def trace(self) -> dict[str, Any]:
        """The trace columns of this result."""
        out = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("order", "counts")}
        out.update({f"n_{k}_ids": v for k, v in dataclasses.asdict(self.counts).items()})
        out["reranked_ids"] = list(self.order)
        return out


class ListwiseReranker:
    """Listing 14 over a question's pool through one :class:`LLMClient`."""

    def __init__(self, client: LLMClient, params: ListwiseParams) -> None:
        self.client = client
        self.params = params

    def rerank(self, question: str, pool: Sequence[Candidate]) -> ListwiseResult:
        """One call, then :func:`repair_order`; failures follow ``on_failure``."""
        if not pool:
            return ListwiseResult([], status="empty_pool")
        payload, words, estimate = fit_payload(question, pool, self.params, self.client.count_tokens)
        result = self.client.call(listwise_prompt(len(pool)), check=any_valid_check(len(pool)),
                                  data=payload)
        pt, ct = result_tokens(result)
        base = {"passage_words": words, "prompt_tokens_estimate": estimate, "prompt_tokens": pt,
                "completion_tokens": ct}
        if not isinstance(result, LLMSuccess):
            kept = [c.passage_id for c in pool] if self.params.on_failure == "dense_order" else []
            return ListwiseResult(kept, status="failed", error_kind=result.kind,
                                  error=result.reason[:500],
                                  fallback=self.params.on_failure == "dense_order", **base)
        returned = list(result.value.ordered_doc_ids)
        positions, counts = repair_order(returned, len(pool))
        return ListwiseResult([pool[i].passage_id for i in positions], counts=counts,
                              returned_ids=[str(v) for v in returned], **base)
