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

After a Parquet round trip the list columns come back as numpy arrays; the validators accept
any list-like of strings.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

CORPUS_DTYPES: dict[str, str] = {"passage_id": "str", "title": "str", "text": "str"}
QUESTIONS_DTYPES: dict[str, str] = {
    "question_id": "str",
    "question": "str",
    "answers": "object",
    "gold_passage_ids": "object",
    "type": "str",
    "n_hops": "int64",
    "gold_reliable": "bool",
    "evidence": "str",
}
CORPUS_COLUMNS: tuple[str, ...] = tuple(CORPUS_DTYPES)
QUESTIONS_COLUMNS: tuple[str, ...] = tuple(QUESTIONS_DTYPES)
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
    digest = hashlib.sha256(f"{title}{_SEP}{text}".encode("utf-8")).hexdigest()
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


def make_corpus(pairs: Iterable[tuple[str, str]]) -> pd.DataFrame:
    """Corpus table from (title, text) pairs: ids assigned, deduplicated, first-occurrence order."""
    ids: dict[tuple[str, str], str] = {}
    for title, text in pairs:
        if (title, text) not in ids:
            ids[(title, text)] = passage_id(title, text)
    rows = {
        "passage_id": list(ids.values()),
        "title": [k[0] for k in ids],
        "text": [k[1] for k in ids],
    }
    return pd.DataFrame(rows, columns=list(CORPUS_COLUMNS)).astype(CORPUS_DTYPES)


def make_questions(records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Questions table from dicts; ``evidence`` defaults to "" and ``gold_reliable`` to True."""
    defaults: dict[str, Any] = {"evidence": "", "gold_reliable": True}
    rows = [{**defaults, **r} for r in records]
    columns: dict[str, list[Any]] = {c: [r[c] for r in rows] for c in QUESTIONS_COLUMNS}
    for col in LIST_COLUMNS:
        columns[col] = [list(v) for v in columns[col]]
    df = pd.DataFrame(columns, columns=list(QUESTIONS_COLUMNS))
    return df.astype({c: d for c, d in QUESTIONS_DTYPES.items() if c not in LIST_COLUMNS})


def validate_corpus(df: pd.DataFrame) -> None:
    """Raise ``ValueError`` naming the problem if ``df`` is not a valid corpus table."""
    _check_columns(df, CORPUS_COLUMNS, "corpus")
    if df.empty:
        raise ValueError("corpus: no passages")
    _check_unique(df["passage_id"], "corpus", "passage_id")
    for col in ("title", "text"):
        _check_strings(df[col], df["passage_id"], "corpus", col)
    for pid, title, text in zip(df["passage_id"], df["title"], df["text"]):
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
    dup = df.duplicated(["title", "text"])
    if dup.any():
        first = df.loc[dup, "passage_id"].iloc[0]
        raise ValueError(f"corpus: duplicate (title, text) at passage_id {first}")
    expected = [passage_id(t, x) for t, x in zip(df["title"], df["text"])]
    bad = [pid for pid, exp in zip(df["passage_id"], expected) if pid != exp]
    if bad:
        raise ValueError(f"corpus: passage_id {bad[0]} is not the content hash of its title and text")


def validate_questions(df: pd.DataFrame, corpus: pd.DataFrame, require_gold: bool = False,
                       require_answers: bool = True) -> None:
    """Raise ``ValueError`` naming the problem (and the question id) if ``df`` is invalid.

    With ``require_gold`` every question must have at least one gold passage; without
    ``require_answers`` (users' own data) a question may have no answers.
    """
    _check_columns(df, QUESTIONS_COLUMNS, "questions")
    if df.empty:
        raise ValueError("questions: no questions")
    _check_unique(df["question_id"], "questions", "question_id")
    ids = df["question_id"]
    _check_nonempty_strings(ids, ids, "questions", "question_id")
    _check_nonempty_strings(df["question"], ids, "questions", "question")
    _check_strings(df["type"], ids, "questions", "type")
    _check_strings(df["evidence"], ids, "questions", "evidence")
    _check_scalars(df, ids)
    known = set(corpus["passage_id"])
    for qid, answers, gold in zip(ids, df["answers"], df["gold_passage_ids"]):
        _check_answers(qid, answers, require_answers)
        _check_gold(qid, gold, known, require_gold)


def _check_columns(df: pd.DataFrame, expected: tuple[str, ...], table: str) -> None:
    missing = [c for c in expected if c not in df.columns]
    extra = [c for c in df.columns if c not in expected]
    if missing or extra:
        raise ValueError(
            f"{table}: columns must be {list(expected)}; missing {missing}, unexpected {extra}"
        )


def _check_unique(col: pd.Series, table: str, name: str) -> None:
    dup = col[col.duplicated()]
    if not dup.empty:
        raise ValueError(f"{table}: duplicate {name} {dup.iloc[0]!r} ({dup.size} duplicate(s))")


def _check_strings(col: pd.Series, ids: pd.Series, table: str, name: str) -> None:
    for key, value in zip(ids, col):
        if not isinstance(value, str):
            raise ValueError(f"{table}: {name} of {key!r} is {type(value).__name__}, not str")
        _check_unicode(value, f"{table}: {name} of {key!r}")


def _check_unicode(value: str, where: str) -> None:
    problem = unicode_problem(value)
    if problem is not None:
        raise ValueError(f"{where} is not valid Unicode ({problem})")


def _check_nonempty_strings(col: pd.Series, ids: pd.Series, table: str, name: str) -> None:
    _check_strings(col, ids, table, name)
    for key, value in zip(ids, col):
        if not value.strip():
            raise ValueError(f"{table}: empty {name} for {key!r}")


def _check_scalars(df: pd.DataFrame, ids: pd.Series) -> None:
    if not pd.api.types.is_integer_dtype(df["n_hops"]):
        raise ValueError(f"questions: n_hops must be integers, got dtype {df['n_hops'].dtype}")
    negative = df["n_hops"] < 0
    if negative.any():
        raise ValueError(f"questions: negative n_hops for {ids[negative].iloc[0]!r}")
    if not pd.api.types.is_bool_dtype(df["gold_reliable"]):
        raise ValueError(f"questions: gold_reliable must be bool, got dtype {df['gold_reliable'].dtype}")


def _as_list(value: Any) -> list[Any] | None:
    if isinstance(value, (list, tuple, np.ndarray)):
        return list(value)
    return None


def _check_answers(qid: str, answers: Any, required: bool = True) -> None:
    items = _as_list(answers)
    if items is not None and not items and not required:
        return
    if not items:
        raise ValueError(f"questions: {qid!r} has no answers (need a non-empty list of strings)")
    if any(not isinstance(a, str) or not a.strip() for a in items):
        raise ValueError(f"questions: {qid!r} has an empty or non-string answer: {items!r}")
    for a in items:
        _check_unicode(a, f"questions: an answer of {qid!r}")
    if len(set(items)) != len(items):
        raise ValueError(f"questions: {qid!r} has duplicate answers: {items!r}")


def _check_gold(qid: str, gold: Any, known: set[str], require_gold: bool) -> None:
    items = _as_list(gold)
    if items is None:
        raise ValueError(f"questions: gold_passage_ids of {qid!r} is {type(gold).__name__}, not a list")
    if require_gold and not items:
        raise ValueError(f"questions: {qid!r} has no gold passages")
    if len(set(items)) != len(items):
        raise ValueError(f"questions: {qid!r} lists a gold passage twice: {items!r}")
    unknown = [g for g in items if g not in known]
    if unknown:
        raise ValueError(f"questions: gold passage id(s) {unknown} of {qid!r} are not in the corpus")
