"""2WikiMultiHopQA (HippoRAG 2 protocol): 6,119-passage corpus, 1,000 questions.

Rules
- Corpus: ``2wikimultihopqa_corpus.json`` (a list of ``{title, text}``), in file order,
  deduplicated by (title, text).
- Questions: ``2wikimultihopqa_reconstructed.json`` in release order; ``answers`` = [answer];
  ``type`` = the record's ``type``; ``n_hops`` = number of evidence triples (``evidences``);
  ``gold_reliable`` = the record's flag (bool, or the strings "True"/"False").
- Gold: the ``supporting_facts`` titles, in their order, resolved to passage ids here, once.
  A title held by one corpus passage resolves to it. A title held by several passages
  resolves to the one whose text equals the ``context`` text given for that title in the
  record (sentences joined with ""); failing an exact match, the one equal after collapsing
  whitespace and case-folding. No match, or several, is a :class:`GoldResolutionError`; so is
  a title missing from the corpus. Errors name the question id and the title.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl

from evichain.data.schema import as_pandas, corpus_table, questions_table
from evichain.data.sources import MalformedSourceError, expect_type, field, load_json

FOLDER = "2wikimultihopqa"
CORPUS_FILE = f"{FOLDER}/2wikimultihopqa_corpus.json"
QUESTIONS_FILE = f"{FOLDER}/2wikimultihopqa_reconstructed.json"
FILES: tuple[str, ...] = (CORPUS_FILE, QUESTIONS_FILE)

TitleIndex = dict[str, list[tuple[str, str]]]  # title -> [(passage_id, text)] in corpus order


class GoldResolutionError(MalformedSourceError):
    """A gold title that cannot be mapped to exactly one corpus passage."""


def tables(source_dir: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Corpus and questions tables of 2Wiki from ``source_dir`` (the ``data/`` folder)."""
    source_dir = Path(source_dir)
    corpus = corpus_table(read_corpus_pairs(source_dir / CORPUS_FILE))
    index = title_index(corpus)
    path = source_dir / QUESTIONS_FILE
    records = expect_type(load_json(path), list, str(path))
    rows = [_question_row(rec, index, f"{path}: record {i}") for i, rec in enumerate(records)]
    return corpus, questions_table(rows)


def convert(source_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`tables` as pandas frames (:func:`evichain.data.schema.as_pandas`); pandas only for
    the callers not yet migrated (``scripts/drills``)."""
    corpus, questions = tables(source_dir)
    return as_pandas(corpus), as_pandas(questions)


def read_corpus_pairs(path: Path) -> list[tuple[str, str]]:
    """(title, text) pairs of a ``[{title, text}, ...]`` corpus file, in file order."""
    items = expect_type(load_json(path), list, str(path))
    return [
        (field(it, "title", str, f"{path}: item {i}"), field(it, "text", str, f"{path}: item {i}"))
        for i, it in enumerate(items)
    ]


def title_index(corpus: pl.DataFrame) -> TitleIndex:
    """Map each title to its passages (id, text), in corpus order."""
    index: TitleIndex = {}
    for pid, title, text in corpus.select("passage_id", "title", "text").iter_rows():
        index.setdefault(title, []).append((pid, text))
    return index


def _question_row(rec: Any, index: TitleIndex, where: str) -> dict[str, Any]:
    qid = field(rec, "_id", str, where)
    where = f"{where} ({qid})"
    contexts = _context_texts(field(rec, "context", list, where), where)
    gold: list[str] = []
    for title in _supporting_titles(field(rec, "supporting_facts", list, where), where):
        pid = resolve_gold_title(qid, title, contexts.get(title, []), index)
        if pid not in gold:
            gold.append(pid)
    return {
        "question_id": qid,
        "question": field(rec, "question", str, where),
        "answers": [field(rec, "answer", str, where)],
        "gold_passage_ids": gold,
        "type": field(rec, "type", str, where),
        "n_hops": len(field(rec, "evidences", list, where)),
        "gold_reliable": parse_reliable(field(rec, "gold_reliable", (bool, str), where), where),
    }


def _supporting_titles(facts: list[Any], where: str) -> list[str]:
    titles: list[str] = []
    for j, fact in enumerate(facts):
        fact = expect_type(fact, list, f"{where}: supporting_facts[{j}]")
        if not fact or not isinstance(fact[0], str):
            raise MalformedSourceError(f"{where}: supporting_facts[{j}] is not [title, sentence_id]")
        titles.append(fact[0])
    return titles


def _context_texts(context: list[Any], where: str) -> dict[str, list[str]]:
    texts: dict[str, list[str]] = {}
    for j, entry in enumerate(context):
        ok = isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
        if not ok or not isinstance(entry[1], list) or not all(isinstance(s, str) for s in entry[1]):
            raise MalformedSourceError(f"{where}: context[{j}] is not [title, [sentence, ...]]")
        texts.setdefault(entry[0], []).append("".join(entry[1]))
    return texts


def parse_reliable(value: bool | str, where: str) -> bool:
    """The ``gold_reliable`` flag: a bool or the strings "True"/"False" (any case)."""
    if isinstance(value, bool):
        return value
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise MalformedSourceError(f"{where}: gold_reliable must be true/false, got {value!r}")


def _normalize(text: str) -> str:
    return " ".join(text.split()).casefold()


_MATCHERS: tuple[Callable[[str, str], bool], ...] = (
    lambda a, b: a == b,
    lambda a, b: _normalize(a) == _normalize(b),
)


def resolve_gold_title(qid: str, title: str, context_texts: list[str], index: TitleIndex) -> str:
    """The passage id of gold ``title`` for question ``qid`` (rules in the module docstring)."""
    candidates = index.get(title)
    if not candidates:
        raise GoldResolutionError(
            f"2Wiki question {qid}: gold title {title!r} is not in the corpus "
            f"({CORPUS_FILE}); the source files are inconsistent: re-copy them from the shared data"
        )
    if len(candidates) == 1:
        return candidates[0][0]
    hits: list[str] = []
    for same in _MATCHERS:
        hits = [pid for pid, text in candidates if any(same(text, ctx) for ctx in context_texts)]
        if hits:
            break
    if len(hits) == 1:
        return hits[0]
    raise GoldResolutionError(
        f"2Wiki question {qid}: gold title {title!r} is ambiguous: {len(candidates)} corpus passages "
        f"carry it and the record's context text matches {len(hits)} of them"
    )
