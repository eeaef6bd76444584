"""EviReform prompts: Listings 11, 12, 13, 15 and 16 of the paper (Appendix C.10), verbatim.

The paper's listings were extracted without spaces; the text below restores the spacing word
by word and keeps the wording. Layout: the listing's instructions are the system message and
come first; the data (paragraphs, propositions, questions) follows in the user message as
minified JSON, so a passage is a quoted JSON string that cannot close the data block or pose
as an instruction (prompt injection stays data). Listing 11 ends with ``Paragraph: {text}``:
that line opens the user message, with the paragraph as a JSON string literal.

Response schemas are pydantic models. For selection, judging and reformulation the JSON schema
sent to the model is narrowed per call (ids as an ``enum`` of the candidate ids, ``maxItems``)
so that grammar-constrained decoding cannot produce an id outside the candidate set, while
validation stays lenient: invalid ids are dropped and counted by the caller (paper C.1).
Bump ``version`` when a text or schema changes (it is part of the LLM cache key).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evichain.llm.prompting import data_prompt
from evichain.llm.types import Prompt, quote_json

# --------------------------------------------------------------------------- Listing 11
LISTING_11 = """Extract all atomic factual propositions from the paragraph below.

Requirements:
1. Each proposition must express one factual unit and be understandable by itself.
2. Replace pronouns or implicit references with the explicit names supported by the paragraph.
3. Preserve dates, quantities, negation, comparisons, and relation direction when they matter.
4. For every proposition, list the key named entities and concrete identifying values explicitly
mentioned in that proposition.
5. Do not merge separate facts merely because they mention the same entity.

Return exactly one JSON object with this schema:
{"propositions":[{"text":"Self-contained fact.","entities":["Entity 1","Entity 2"]}]}"""

# --------------------------------------------------------------------------- Listing 12
LISTING_12 = """You compile a sparse entry distribution for multi-hop document retrieval.
You receive one minified JSON object. "q" is the question and "c" is the list of $n_candidates
paragraph-derived atomic propositions. In every candidate object, "i" is the proposition ID and
"t" is its proposition text. Select a variable-size set of at most $max_selected proposition IDs that gives
direct semantic entry to every plausible evidence route named by the question. A useful entry may
bind a person, work, place, event, date, comparison target, or relation needed before the final
answer; it need not state the answer. Do not pad with generic background, repetitions, or merely
popular entities.
Use only the supplied proposition IDs.
Return one JSON object exactly in this schema:
{
  "selected_proposition_ids": [123, 456]
}"""

# --------------------------------------------------------------------------- Listing 13
LISTING_13 = """Given a question and selected evidence paragraphs, return up to three short search queries for
evidence that is still needed. Do not repeat a fact already stated in the evidence. Use names and
values from the input instead of inventing new ones.
Return exactly one JSON object:
{"queries": ["..."]}"""

# --------------------------------------------------------------------------- Listing 15
LISTING_15 = """You judge a fixed retrieval candidate pool using an already observed evidence state.
The user input is one JSON object with three fields:
- `q`: the original question;
- `e`: observed evidence passages E, each with `id` and `text`;
- `c`: the frozen candidate pool C, each with `id` and `text`.
Rank only the passages in C. Condition every judgment on both q and the information already
available in E. Prefer a candidate when adding it to E supplies a missing bridge, relation,
attribute, comparison, or answer-bearing fact needed for a complete evidence chain. Penalize
passages that merely repeat E, share a popular entity without closing a need, or are only
topically similar. E may be incomplete or noisy; do not assume that every observed passage is
correct or sufficient.
Do not generate a new search query. Do not introduce an ID outside C. Do not use outside
knowledge. Return one valid JSON object only:
{"ordered_doc_ids": [<candidate ids from most to least useful>]}
Include every candidate ID exactly once."""

# --------------------------------------------------------------------------- Listing 16
LISTING_16 = """You are a bounded evidence-gap controller for paragraph-only multi-hop retrieval.
The user input is one JSON object with:
- `round`: the current feedback round (1, 2, or 3);
- `q`: the original question;
- `e`: all evidence passages observed so far, each with `id` and paragraph-only `text`.
Decide whether E already contains a complete, source-grounded evidence chain sufficient to
answer q. If it is sufficient, emit no gaps. If it is not sufficient, identify at most three
specific missing facts and give one short retrieval query for each.
Each retrieval query must target the missing fact, not merely paraphrase q. It may use only
entities or values explicitly present in q or E plus relation/type words needed to state the
gap. Never guess an answer entity, invent a bridge, rank candidate documents, construct a
multi-step plan, or rely on outside knowledge. Different gaps must have different queries.
Return exactly one valid JSON object in one of these forms:
{"sufficient": true, "gaps": []}
{"sufficient": false, "gaps": [{"description": "missing fact", "retrieval_query": "short query"}]}"""


# --------------------------------------------------------------------------- schemas
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExtractedProposition(_Strict):
    """One proposition of Listing 11."""

    text: str
    entities: list[str] = Field(default_factory=list)


class ExtractionResponse(_Strict):
    """Listing 11 response."""

    propositions: list[ExtractedProposition]


class SelectionResponse(_Strict):
    """Listing 12 response."""

    selected_proposition_ids: list[int]


class QueriesResponse(_Strict):
    """Listing 13 response."""

    queries: list[str]


class JudgeResponse(_Strict):
    """Listing 15 response."""

    ordered_doc_ids: list[int]


class Gap(_Strict):
    """One missing fact of Listing 16."""

    description: str
    retrieval_query: str


class GapResponse(_Strict):
    """Listing 16 response."""

    sufficient: bool
    gaps: list[Gap] = Field(default_factory=list)


# --------------------------------------------------------------------------- prompts
EXTRACT = Prompt(name="evireform.extract", version="1", system=LISTING_11,
                 user="Paragraph:\n$paragraph", schema=ExtractionResponse)
SELECT = data_prompt("evireform.select", LISTING_12, SelectionResponse)
REFORMULATE = data_prompt("evireform.reformulate", LISTING_13, QueriesResponse)
JUDGE = data_prompt("evireform.judge", LISTING_15, JudgeResponse)
GAPS = data_prompt("evireform.gaps", LISTING_16, GapResponse)


def minified(obj: Any) -> str:
    """Minified JSON (no spaces, UTF-8 kept): the data block of every user message."""
    return quote_json(obj)


def paragraph_literal(text: str) -> str:
    """The Listing 11 ``{text}`` slot: the paragraph as a quoted JSON string."""
    return quote_json(text)


def selection_prompt(n_candidates: int, max_selected: int) -> Prompt[Any]:
    """Listing 12 with the candidate count and the selection budget filled in."""
    system = LISTING_12.replace("$n_candidates", str(n_candidates)).replace(
        "$max_selected", str(max_selected))
    return dataclasses.replace(SELECT, system=system)


def ids_check(valid: set[int], field: str) -> Callable[[Any], None]:
    """Client check: at least one returned id must be in ``valid`` (else repair, then fail)."""

    def check(value: Any) -> None:
        ids = getattr(value, field)
        if not any(int(i) in valid for i in ids):
            raise ValueError(f"none of the {len(ids)} returned ids is a supplied candidate id")

    return check


def extraction_check(value: ExtractionResponse) -> None:
    """Client check for Listing 11: at least one non-empty proposition."""
    if not any(p.text.strip() for p in value.propositions):
        raise ValueError("no non-empty proposition was returned")
