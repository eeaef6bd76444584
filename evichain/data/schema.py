"""The two tables every dataset is converted into, their ids and their validation.

``corpus.parquet``: ``passage_id`` (str), ``title`` (str), ``text`` (str).

- ``passage_id = "p" + sha256(title + "\\x1f" + text)[:16]`` (hex): a content hash, so equal
  (title, text) pairs get equal ids in every dataset and every run, and ids never depend on
  row order.
- Rows are in source order of first occurrence, deduplicated by (title, text).

``questions.parquet``: ``question_id`` (str), ``question`` (str), ``answers`` (list[str]:
the canonical answer first, then aliases; deduplicated, empty strings dropped),
``gold_passage_ids`` (list[str], in supporting order; empty only for datasets without gold
passages, i.e. GraphRAG-Bench Medical), ``type`` (str), ``n_hops`` (int; 0 where unknown),
``gold_reliable`` (bool), ``evidence`` (str; the Medical evidence text, "" elsewhere).
Rows are in the dataset's release order.

The tables are polars frames (``String``, ``List(String)``, ``Int64``, ``Boolean``); a list
column whose lists are all empty is ``List(Null)``, the type pandas gave it, so the Parquet bytes
stay those of the pandas build. polars strings are UTF-8, so a lone surrogate (JSON ``"\\ud800"``)
cannot reach a table: the converters reject it where they read the record
(:func:`evichain.data.sources.field`), users' files line by line (:mod:`evichain.data.user`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd
import polars as pl
import pyarrow as pa

CORPUS_SCHEMA: dict[str, pl.DataType] = {"passage_id": pl.String(), "title": pl.String(),
                                         "text": pl.String()}
QUESTIONS_SCHEMA: dict[str, pl.DataType] = {
    "question_id": pl.String(),
    "question": pl.String(),
    "answers": pl.List(pl.String()),
    "gold_passage_ids": pl.List(pl.String()),
    "type": pl.String(),
    "n_hops": pl.Int64(),
    "gold_reliable": pl.Boolean(),
    "evidence": pl.String(),
}
CORPUS_COLUMNS: tuple[str, ...] = tuple(CORPUS_SCHEMA)
QUESTIONS_COLUMNS: tuple[str, ...] = tuple(QUESTIONS_SCHEMA)
LIST_COLUMNS: tuple[str, ...] = ("answers", "gold_passage_ids")

# Arrow schemas, for writers that want identical Parquet types across datasets (pyarrow
# infers ``list<null>`` for a list column whose lists are all empty, e.g. Medical gold ids).
CORPUS_ARROW_SCHEMA = pa.schema([(c, pa.string()) for c in CORPUS_COLUMNS])
QUESTIONS_ARROW_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("question", pa.string()),
        ("answers", pa.list_(pa.string())),
        ("gold_passage_ids", pa.list_(pa.string())),
        ("type", pa.string()),
        ("n_hops", pa.int64()),
        ("gold_reliable", pa.bool_()),
        ("evidence", pa.string()),
    ]
)

_SEP = "\x1f"

# One passage longer than this is a document, not a passage: no LLM context of the bundled
# model holds it and embedding models read only its first few hundred tokens. The longest
# passage of the bundled benchmarks has 8,268 characters (HotpotQA).
MAX_PASSAGE_CHARS = 100_000


def overlong_passage(text: str) -> str | None:
    """What is wrong with a passage text longer than :data:`MAX_PASSAGE_CHARS`; ``None`` if it fits."""
    if len(text) <= MAX_PASSAGE_CHARS:
        return None
    return (f"has {len(text):,} characters, more than the {MAX_PASSAGE_CHARS:,}-character limit "
            "for one passage (MAX_PASSAGE_CHARS in evichain/data/schema.py: no LLM context of the "
            "bundled model holds a longer one)")


def unicode_problem(value: str) -> str | None:
    """What makes ``value`` unencodable as UTF-8 (a lone surrogate) and where; ``None`` if valid."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate {value[exc.start]!r} at character {exc.start}"
    return None


def passage_id(title: str, text: str) -> str:
    """Stable content-hash id of a passage: ``"p"`` + first 16 hex digits of SHA-256."""
    digest = hashlib.sha256(f"{title}{_SEP}{text}".encode()).hexdigest()
    return "p" + digest[:16]


def unique_strings(values: Iterable[str]) -> list[str]:
    """Order-preserving deduplication that drops blank strings (values are kept unstripped)."""
    seen: set[str] = set()
    out: list[str] = []
    for value in values:
        if value.strip() and value not in seen:
            seen.add(value)
            out.append(value)
    return out


def corpus_table(pairs: Iterable[tuple[str, str]]) -> pl.DataFrame:
    """Corpus table from (title, text) pairs: ids assigned, deduplicated, first-occurrence order."""
    ids: dict[tuple[str, str], str] = {}
    for title, text in pairs:
        if (title, text) not in ids:
            ids[(title, text)] = passage_id(title, text)
    rows = {"passage_id": list(ids.values()), "title": [k[0] for k in ids], "text": [k[1] for k in ids]}
    return pl.DataFrame(rows, schema=CORPUS_SCHEMA)


def make_corpus(pairs: Iterable[tuple[str, str]]) -> pd.DataFrame:
    """:func:`corpus_table` as the pandas frame it used to be (``str`` columns, fresh index).

    pandas only for the callers not yet migrated (``scripts/drills``).
    """
    return as_pandas(corpus_table(pairs))


def questions_table(records: Sequence[dict[str, Any]]) -> pl.DataFrame:
    """Questions table from dicts; ``evidence`` defaults to "" and ``gold_reliable`` to True.

    A list column whose lists are all empty (no gold anywhere) is ``List(Null)``, as pandas
    inferred it (see the module docstring).
    """
    defaults: dict[str, Any] = {"evidence": "", "gold_reliable": True}
    rows = [{**defaults, **r} for r in records]
    columns: dict[str, list[Any]] = {c: [r[c] for r in rows] for c in QUESTIONS_COLUMNS}
    schema = dict(QUESTIONS_SCHEMA)
    for col in LIST_COLUMNS:
        columns[col] = [list(v) for v in columns[col]]
        if not any(columns[col]):
            schema[col] = pl.List(pl.Null())
    return pl.DataFrame(columns, schema=schema)


def as_pandas(table: pl.DataFrame) -> pd.DataFrame:
    """A corpus or questions table as the pandas frame the pandas build made: ``str`` columns,
    Python lists in the list columns, ``int64``/``bool`` scalars, a fresh index."""
    frame = pd.DataFrame(table.to_dict(as_series=False), columns=table.columns)
    strings = [c for c, t in table.schema.items() if t == pl.String]
    return frame.astype(dict.fromkeys(strings, "str"))


def validate_corpus(df: pl.DataFrame) -> None:
    """Raise ``ValueError`` naming the problem if ``df`` is not a valid corpus table."""
    _check_columns(df, CORPUS_COLUMNS, "corpus")
    if df.is_empty():
        raise ValueError("corpus: no passages")
    _check_unique(df["passage_id"], "corpus", "passage_id")
    ids = df["passage_id"].to_list()
    for col in ("title", "text"):
        _check_strings(df[col], ids, "corpus", col)
    for pid, title, text in zip(ids, df["title"].to_list(), df["text"].to_list()):
        _check_passage(pid, title, text)
    dup = ~df.select(pl.struct("title", "text").is_first_distinct()).to_series()
    if dup.any():
        raise ValueError(f"corpus: duplicate (title, text) at passage_id {df['passage_id'].filter(dup)[0]}")
    bad = [pid for pid, t, x in zip(ids, df["title"], df["text"]) if pid != passage_id(t, x)]
    if bad:
        raise ValueError(f"corpus: passage_id {bad[0]} is not the content hash of its title and text")


def _check_passage(pid: str, title: str, text: str) -> None:
    """A passage needs a non-blank title and text of at most :data:`MAX_PASSAGE_CHARS`."""
    if not title.strip():
        raise ValueError(f"corpus: empty title for {pid!r} (text {text[:60]!r})")
    if not text.strip():
        raise ValueError(f"corpus: empty text for {pid!r} (title {title!r})")
    too_long = overlong_passage(text)
    if too_long is not None:
        raise ValueError(
            f"corpus: passage {pid!r} (title {title!r}): text {too_long}; split long documents "
            "into passages (as the Medical converter does with data.medical.chunk_words)"
        )


def validate_questions(df: pl.DataFrame, corpus: pl.DataFrame, require_gold: bool = False,
                       require_answers: bool = True) -> None:
    """Raise ``ValueError`` naming the problem (and the question id) if ``df`` is invalid.

    With ``require_gold`` every question must have at least one gold passage; without
    ``require_answers`` (users' own data) a question may have no answers.
    """
    _check_columns(df, QUESTIONS_COLUMNS, "questions")
    if df.is_empty():
        raise ValueError("questions: no questions")
    _check_unique(df["question_id"], "questions", "question_id")
    ids = df["question_id"].to_list()
    _check_nonempty_strings(df["question_id"], ids, "questions", "question_id")
    _check_nonempty_strings(df["question"], ids, "questions", "question")
    _check_strings(df["type"], ids, "questions", "type")
    _check_strings(df["evidence"], ids, "questions", "evidence")
    _check_scalars(df, ids)
    known = set(corpus["passage_id"].to_list())
    for qid, answers, gold in zip(ids, df["answers"].to_list(), df["gold_passage_ids"].to_list()):
        _check_answers(qid, answers, require_answers)
        _check_gold(qid, gold, known, require_gold)


def _check_columns(df: pl.DataFrame, expected: tuple[str, ...], table: str) -> None:
    """The columns are exactly ``expected`` (any order)."""
    missing = [c for c in expected if c not in df.columns]
    extra = [c for c in df.columns if c not in expected]
    if missing or extra:
        raise ValueError(
            f"{table}: columns must be {list(expected)}; missing {missing}, unexpected {extra}"
        )


def _check_unique(col: pl.Series, table: str, name: str) -> None:
    """No value twice: names the first repeat (a second occurrence) and how many repeats."""
    dup = col.filter(~col.is_first_distinct())
    if dup.len():
        raise ValueError(f"{table}: duplicate {name} {dup[0]!r} ({dup.len()} duplicate(s))")


def _check_strings(col: pl.Series, ids: list[str], table: str, name: str) -> None:
    """Every value is a string (not null, not another type)."""
    for key, value in zip(ids, col.to_list()):
        if not isinstance(value, str):
            raise ValueError(f"{table}: {name} of {key!r} is {type(value).__name__}, not str")


def _check_nonempty_strings(col: pl.Series, ids: list[str], table: str, name: str) -> None:
    """Every value is a string with a non-blank character."""
    _check_strings(col, ids, table, name)
    for key, value in zip(ids, col.to_list()):
        if not value.strip():
            raise ValueError(f"{table}: empty {name} for {key!r}")


def _check_scalars(df: pl.DataFrame, ids: list[str]) -> None:
    """``n_hops``: integers >= 0; ``gold_reliable``: booleans."""
    if not df["n_hops"].dtype.is_integer():
        raise ValueError(f"questions: n_hops must be integers, got dtype {df['n_hops'].dtype}")
    negative = [qid for qid, n in zip(ids, df["n_hops"].to_list()) if n is not None and n < 0]
    if negative:
        raise ValueError(f"questions: negative n_hops for {negative[0]!r}")
    if df["gold_reliable"].dtype != pl.Boolean:
        raise ValueError(f"questions: gold_reliable must be bool, got dtype {df['gold_reliable'].dtype}")


def _check_answers(qid: str, answers: list[str] | None, required: bool = True) -> None:
    """Answers: a non-empty list of distinct non-blank strings (may be empty if not required)."""
    if answers is not None and not answers and not required:
        return
    if not answers:
        raise ValueError(f"questions: {qid!r} has no answers (need a non-empty list of strings)")
    if any(not isinstance(a, str) or not a.strip() for a in answers):
        raise ValueError(f"questions: {qid!r} has an empty or non-string answer: {answers!r}")
    if len(set(answers)) != len(answers):
        raise ValueError(f"questions: {qid!r} has duplicate answers: {answers!r}")


def _check_gold(qid: str, gold: list[str] | None, known: set[str], require_gold: bool) -> None:
    """Gold: a list of distinct corpus passage ids (non-empty with ``require_gold``)."""
    if gold is None:
        raise ValueError(f"questions: gold_passage_ids of {qid!r} is NoneType, not a list")
    if require_gold and not gold:
        raise ValueError(f"questions: {qid!r} has no gold passages")
    if len(set(gold)) != len(gold):
        raise ValueError(f"questions: {qid!r} lists a gold passage twice: {gold!r}")
    unknown = [g for g in gold if g not in known]
    if unknown:
        raise ValueError(f"questions: gold passage id(s) {unknown} of {qid!r} are not in the corpus")
