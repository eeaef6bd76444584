"""GraphRAG-Bench Medical: one long document chunked into passages; 2,062 questions.

Chunking (``chunk_words`` = size, ``overlap_words`` = overlap; words = runs of non-space)
- A sentence ends after a word that ends in ``.``, ``!`` or ``?`` (optionally followed by
  closing quotes/brackets), after a word followed by a line break, and after the last word.
  Abbreviations such as "e.g." therefore also count as sentence ends.
- A chunk ends after the last sentence end that gives it between ``size//2 + 1`` and
  ``size`` words and lies past the previous chunk's end; if there is none it is cut after
  exactly ``size`` words. The last chunk runs to the end of the text (at most ``size`` words).
- The next chunk starts at the first sentence start among the previous chunk's last
  ``overlap`` words (so it overlaps by at most ``overlap`` words and starts on a sentence);
  if no sentence starts there, exactly ``overlap`` words back (never at or before the
  previous start). With ``overlap`` = 0 chunks are contiguous.
- Hence every word is in at least one chunk, consecutive chunks overlap by 1..``overlap``
  words, and no chunk is empty. A chunk's text is the original text from its first word to
  its last (inner whitespace and line breaks kept).
- Titles are ``f"{corpus_name} #{i:04d}"``, i = 0, 1, ... in text order.

Questions (``medical_questions.json``, file order): ``answers`` = [answer], ``type`` =
``question_type``, ``evidence`` = the ``evidence`` text, no gold passages, ``n_hops`` = 0.
:func:`balanced_subset_ids` gives the ids of the 100-question balanced subset.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from evichain.data.schema import corpus_table, questions_table
from evichain.data.sources import MalformedSourceError, expect_type, field, load_json

FOLDER = "graphrag-bench"
CORPUS_FILE = f"{FOLDER}/medical.json"
QUESTIONS_FILE = f"{FOLDER}/medical_questions.json"
BALANCED_FILE = f"{FOLDER}/medical_questions_100_balanced.json"
FILES: tuple[str, ...] = (CORPUS_FILE, QUESTIONS_FILE)

_WORD = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*$")

Span = tuple[int, int]  # word indices [start, end)


def tables(
    source_dir: Path, chunk_words: int = 200, overlap_words: int = 40
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Corpus (chunked) and questions tables of GraphRAG-Bench Medical."""
    source_dir = Path(source_dir)
    pairs: list[tuple[str, str]] = []
    for name, text in read_documents(source_dir / CORPUS_FILE):
        chunks = chunk_text(text, chunk_words, overlap_words)
        pairs.extend((f"{name} #{i:04d}", chunk) for i, chunk in enumerate(chunks))
    return corpus_table(pairs), questions_table(read_questions(source_dir / QUESTIONS_FILE))


def read_documents(path: Path) -> list[tuple[str, str]]:
    """(corpus_name, context) of ``medical.json``: one object, or a list of them."""
    data = load_json(path)
    items = data if isinstance(data, list) else [data]
    docs = []
    for i, item in enumerate(items):
        where = f"{path}: item {i}"
        docs.append((field(item, "corpus_name", str, where), field(item, "context", str, where)))
    return docs


def read_questions(path: Path) -> list[dict[str, Any]]:
    """Question rows of a GraphRAG-Bench questions file."""
    records = expect_type(load_json(path), list, str(path))
    rows = []
    for i, rec in enumerate(records):
        where = f"{path}: record {i}"
        rows.append(
            {
                "question_id": field(rec, "id", str, where),
                "question": field(rec, "question", str, where),
                "answers": [field(rec, "answer", str, where)],
                "gold_passage_ids": [],
                "type": field(rec, "question_type", str, where),
                "n_hops": 0,
                "evidence": field(rec, "evidence", str, where),
            }
        )
    return rows


def balanced_subset_ids(source_dir: Path) -> list[str]:
    """Ids of the 100-question balanced subset, in file order."""
    path = Path(source_dir) / BALANCED_FILE
    records = expect_type(load_json(path), list, str(path))
    ids = [field(rec, "id", str, f"{path}: record {i}") for i, rec in enumerate(records)]
    if len(set(ids)) != len(ids):
        raise MalformedSourceError(f"{path}: duplicate question ids")
    return ids


def chunk_text(text: str, chunk_words: int, overlap_words: int) -> list[str]:
    """The chunks of ``text`` (rules in the module docstring)."""
    words = list(_WORD.finditer(text))
    spans = chunk_spans(sentence_ends(text, words), chunk_words, overlap_words)
    return [text[words[s].start() : words[e - 1].end()] for s, e in spans]


def sentence_ends(text: str, words: list[re.Match[str]]) -> list[bool]:
    """``ends[i]`` is True when a sentence ends after word ``i``."""
    ends = []
    for i, word in enumerate(words):
        last = i + 1 == len(words)
        gap = "" if last else text[word.end() : words[i + 1].start()]
        ends.append(last or "\n" in gap or bool(_SENTENCE_END.search(word.group())))
    return ends


def chunk_spans(ends: list[bool], chunk_words: int, overlap_words: int) -> list[Span]:
    """Word spans of the chunks, given the sentence-end flags of the words."""
    if chunk_words < 1 or not 0 <= overlap_words < chunk_words:
        raise ValueError(
            "need chunk_words >= 1 and 0 <= overlap_words < chunk_words, "
            f"got chunk_words={chunk_words}, overlap_words={overlap_words}"
        )
    spans: list[Span] = []
    start, prev_end = 0, 0
    while start < len(ends):
        end = _chunk_end(ends, start, prev_end, chunk_words)
        spans.append((start, end))
        if end >= len(ends):
            break
        start, prev_end = _next_start(ends, start, end, overlap_words), end
    return spans


def _chunk_end(ends: list[bool], start: int, prev_end: int, size: int) -> int:
    limit = start + size
    if limit >= len(ends):
        return len(ends)
    floor = max(start + size // 2, prev_end)
    for end in range(limit, floor, -1):
        if ends[end - 1]:
            return end
    return limit


def _next_start(ends: list[bool], start: int, end: int, overlap: int) -> int:
    if overlap == 0:
        return end
    lowest = max(end - overlap, start + 1)
    for candidate in range(lowest, end):
        if ends[candidate - 1]:
            return candidate
    return lowest
