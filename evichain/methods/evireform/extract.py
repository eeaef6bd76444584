"""Proposition extraction for the EviReform index (paper §3.4; Listing 11).

Two extractors fill the same tables:

* ``llm`` (the paper): Listing 11 per passage through :class:`~evichain.llm.LLMClient`
  (cache, retries, schema, one repair). A passage is ``ok`` with its propositions, or
  ``failed`` with the client's failure kind and reason; it never raises.
* ``sentences`` (LLM-free): one proposition per sentence. Entities of a sentence are
  (1) its passage title (``sentence_title_entity``), (2) corpus titles found in it as whole
  words, case-insensitively (leftmost-longest match over word tokens; a one-word title must be
  capitalised and not followed by a capitalised word; a title's base without a
  trailing parenthetical, e.g. ``Theodred II`` for ``Theodred II (Bishop of Elmham)``, also
  matches when it has ≥ 2 words and belongs to one title only), and (3) a pattern NER:
  capitalised multi-word spans (connectors such as "of", "de", "von" allowed inside) and
  dates / years (four digits, or three digits after a cue word: "in 928"). A spaCy model package (``en_core_web_sm``) could replace the
  pattern NER; none is installed here, so the patterns are the documented default.

Tables: propositions ``(prop_id, passage_id, text, entities, extractor)`` with
``prop_id = "<passage_id>#<ordinal>"`` (content-addressed through the passage id);
status ``(passage_id, status, error_kind, error, n_propositions, extractor, fallback,
prompt_tokens, completion_tokens)``; token counts are the response's own (the same on a cache
hit), so a resumed run writes byte-identical status rows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evichain.llm import LLMClient, LLMSuccess
from evichain.methods.evireform.llm_steps import tokens_used
from evichain.methods.evireform.params import IndexParams
from evichain.methods.evireform.prompts import EXTRACT, extraction_check, paragraph_literal
from evichain.text.sentences import TitleMatcher, dedupe_ci, split_sentences

__all__ = ["PROPOSITION_COLUMNS", "STATUS_COLUMNS", "PassageExtraction", "TitleMatcher", "dedupe_ci",
           "llm_propositions", "order_tables", "pattern_entities", "sentence_extraction",
           "sentence_propositions", "split_sentences", "with_fallback"]

PROPOSITION_COLUMNS = ["prop_id", "passage_id", "text", "entities", "extractor"]
STATUS_COLUMNS = ["passage_id", "status", "error_kind", "error", "n_propositions", "extractor",
                  "fallback", "prompt_tokens", "completion_tokens"]

_MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|"
           "December")
_DATE = re.compile(rf"\b(?:\d{{1,2}}\s+(?:{_MONTHS})\s+\d{{3,4}}|(?:{_MONTHS})\s+\d{{1,2}},?\s+"
                   rf"\d{{3,4}}|(?:{_MONTHS})\s+\d{{4}})\b")
_YEAR = re.compile(r"\b(?:1\d{3}|20\d{2})\b")
_CUE_YEAR = re.compile(r"\b(?:in|died|born|between|and|or|after|before|since|until|from|to|c\.)\s+(\d{3})\b")
_CONNECTOR = r"(?:of|the|de|del|della|da|di|do|dos|du|la|le|van|von|der|den|bin|ibn|al|y|for)"
_CAP_WORD = r"[A-Z][\w'’.\-]*"
_SPAN = re.compile(rf"\b{_CAP_WORD}(?:\s+(?:{_CONNECTOR}\s+)*{_CAP_WORD})+")
_LEADING_STOP = frozenset(
    "the a an in on at he she it his her they their this that after before during from by with "
    "for as when while its also both".split())


def pattern_entities(sentence: str) -> list[str]:
    """Pattern NER: dates, years outside dates (four digits, or three after a cue word such
    as "in", "died", "between"), capitalised multi-word spans (possessive 's removed)."""
    found: list[str] = []
    taken: list[tuple[int, int]] = []
    for m in _DATE.finditer(sentence):
        found.append(m.group(0))
        taken.append(m.span())
    years = [(m.start(), m.group(0)) for m in _YEAR.finditer(sentence)]
    years += [(m.start(1), m.group(1)) for m in _CUE_YEAR.finditer(sentence)]
    for start, year in sorted(years):
        if not any(a <= start < b for a, b in taken):
            found.append(year)
    for m in _SPAN.finditer(sentence):
        words = m.group(0).split()
        while words and words[0].lower() in _LEADING_STOP:
            words = words[1:]
        if len(words) >= 2 and not re.fullmatch(_MONTHS, words[0]):
            found.append(re.sub(r"['’]s$", "", " ".join(words)).rstrip(".'’"))
    return found


def sentence_propositions(passage_id: str, title: str, text: str, matcher: TitleMatcher,
                          params: IndexParams) -> list[dict[str, Any]]:
    """The ``sentences`` extractor for one passage (see module docstring)."""
    rows = []
    for k, sentence in enumerate(split_sentences(text)):
        ents = [title] if params.sentence_title_entity else []
        ents += matcher.find(sentence) + pattern_entities(sentence)
        body = f"{title}: {sentence}" if params.sentence_title_prefix else sentence
        rows.append({"prop_id": f"{passage_id}#{k}", "passage_id": passage_id, "text": body,
                     "entities": dedupe_ci(ents), "extractor": "sentences"})
    return rows


# --------------------------------------------------------------------------- LLM
@dataclass
class PassageExtraction:
    """Propositions and the status row of one passage."""

    propositions: list[dict[str, Any]] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)


def llm_propositions(client: LLMClient, passage_id: str, text: str) -> PassageExtraction:
    """Listing 11 for one passage: propositions, or a ``failed`` status row (never raises)."""
    result = client.call(EXTRACT, check=extraction_check, paragraph=paragraph_literal(text))
    tokens = tokens_used(client, result)
    if not isinstance(result, LLMSuccess):
        status = {**_status(passage_id, "llm", tokens), **result.status_row()}
        return PassageExtraction([], status)
    rows = []
    for prop in result.value.propositions:
        body = " ".join(prop.text.split())
        if body:
            rows.append({"prop_id": f"{passage_id}#{len(rows)}", "passage_id": passage_id,
                         "text": body, "entities": dedupe_ci(prop.entities), "extractor": "llm"})
    status = _status(passage_id, "llm", result.response_tokens)
    status["n_propositions"] = len(rows)
    return PassageExtraction(rows, status)


def with_fallback(outcome: PassageExtraction, title: str, text: str, matcher: TitleMatcher,
                  params: IndexParams) -> PassageExtraction:
    """A failed LLM passage gets its sentence propositions when ``failure_fallback`` says so."""
    if outcome.status.get("status") != "failed" or params.failure_fallback != "sentences":
        return outcome
    rows = sentence_propositions(outcome.status["passage_id"], title, text, matcher, params)
    status = {**outcome.status, "fallback": "sentences", "n_propositions": len(rows)}
    return PassageExtraction(rows, status)


def sentence_extraction(passage_id: str, title: str, text: str, matcher: TitleMatcher,
                        params: IndexParams) -> PassageExtraction:
    """The ``sentences`` extractor with its status row."""
    rows = sentence_propositions(passage_id, title, text, matcher, params)
    status = _status(passage_id, "sentences", (0, 0))
    status["n_propositions"] = len(rows)
    return PassageExtraction(rows, status)


def _status(passage_id: str, extractor: str, tokens: tuple[int, int]) -> dict[str, Any]:
    return {"passage_id": passage_id, "status": "ok", "error_kind": "", "error": "",
            "n_propositions": 0, "extractor": extractor, "fallback": "",
            "prompt_tokens": tokens[0], "completion_tokens": tokens[1]}


def order_tables(props: Sequence[dict[str, Any]], status: Sequence[dict[str, Any]],
                 passage_order: Sequence[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rows sorted by stored passage order, then proposition ordinal (deterministic output)."""
    rank = {pid: i for i, pid in enumerate(passage_order)}
    props = sorted(props, key=lambda r: (rank[r["passage_id"]], int(r["prop_id"].rsplit("#", 1)[1])))
    status = sorted(status, key=lambda r: rank[r["passage_id"]])
    return props, status
