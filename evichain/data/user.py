"""Users' own data: JSONL corpus, questions and optional gold, read into the two tables.

File formats (UTF-8, one JSON object per line, blank lines ignored; a UTF-8 byte-order mark
at the start of a file is allowed):

- corpus: ``{"id": str, "title": str, "text": str}``; ``id`` is the user's own passage id
  (optional: without it the line number, ``"L<n>"``, is the id). The pipeline's ``passage_id``
  stays the content hash of ``(title, text)`` (:func:`evichain.data.schema.passage_id`); the
  user's ids are kept in an id map so every output can be written back in them.
- questions: ``{"id" | "question_id": str, "question": str, "answers": [str]?,
  "gold": [passage id]?, "type": str?}``; ``answers`` (optional) enable the reader's EM/F1,
  ``gold`` the retrieval metrics.
- gold (optional, ``--gold``): ``{"question_id": str, "passage_id": str}``, one line per gold
  passage of a question in supporting order; it adds to a question's inline ``gold``.

Ids (passage and question) may be JSON strings or integers; an integer is used as its decimal
string.

Every problem raises :class:`UserDataError` with one line
``<file>:<line>: <what is wrong> (<the user's id, where the line has one>); <how to fix>``.
All checks are made here, line by line, so messages name the user's ids and lines, never the
content hashes; :func:`evichain.data.schema.validate_corpus` and
:func:`~evichain.data.schema.validate_questions` then run on the built tables as a safety net
(a failure there is reported with the hashes mapped back to the user's ids and lines).

The tables are built and validated as polars frames; :class:`UserDataset` holds them as pandas
(:func:`evichain.data.schema.as_pandas`, the frames the pandas build made) because its readers
outside the library's data layer take pandas: ``flows/cli.py`` passes ``data.corpus`` to
:func:`evichain.methods.estimate.estimate_calls`, and ``flows/user.py`` maps the pandas run of
:func:`flows.method.run_method` with :meth:`UserDataset.to_user_ids`.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
from rapidfuzz import fuzz, process

from evichain.data.schema import (
    as_pandas,
    corpus_table,
    overlong_passage,
    passage_id,
    questions_table,
    unicode_problem,
    validate_corpus,
    validate_questions,
)
from evichain.data.sources import SourceDataError

# A suggested id ("did you mean ...?") must reach this rapidfuzz ``fuzz.ratio`` (0-100) with the
# unknown id: "d99" -> "d9" scores 80, "doc_12" -> "doc_21" 83, "q9" -> "q1" only 50.
SUGGEST_MIN_RATIO = 75.0

_CORPUS_FIELDS = ("id", "title", "text")
_QUESTION_FIELDS = ("id", "question_id", "question", "answers", "gold", "type")
_GOLD_FIELDS = ("question_id", "passage_id")
_ID_IN_TEXT = re.compile(r'"(?:question_id|id)"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')
_HASH = re.compile(r"\bp[0-9a-f]{16}\b")


class UserDataError(SourceDataError, ValueError):
    """A user's corpus, questions or gold file is missing or malformed."""


@dataclass(frozen=True)
class UserDataset:
    """A user's data as the pipeline's tables plus the map back to the user's passage ids
    (pandas: see the module docstring)."""

    corpus: pd.DataFrame
    questions: pd.DataFrame
    id_map: pd.DataFrame  # passage_id (content hash) -> user_id

    @property
    def has_gold(self) -> bool:
        """Whether any question has a gold passage."""
        return bool(self.questions["gold_passage_ids"].map(len).gt(0).any())

    @property
    def has_answers(self) -> bool:
        """Whether any question has an answer."""
        return bool(self.questions["answers"].map(len).gt(0).any())

    def to_user_ids(self, run: pd.DataFrame) -> pd.DataFrame:
        """``run`` with its ``passage_id`` column replaced by the user's ids."""
        mapping = dict(zip(self.id_map["passage_id"], self.id_map["user_id"]))
        return run.assign(passage_id=run["passage_id"].map(mapping))


@dataclass(frozen=True)
class Passage:
    """Where a passage of the user's corpus file came from."""

    user_id: str
    line: int
    passage_id: str  # content hash


@dataclass(frozen=True)
class Line:
    """One JSON object of a user's file, with what is needed to report a problem in it."""

    path: Path
    number: int
    obj: dict[str, Any]
    kind: str  # "passage" or "question": what the line's id names
    fields: tuple[str, ...]  # the fields this kind of line may have

    def error(self, what: str, fix: str, who: str | None = None) -> UserDataError:
        """``<file>:<line>: <what> (<kind> "<id>"); <fix>``; ``who`` defaults to the line's id."""
        who = who if who is not None else self.who()
        return user_error(self.path, self.number, what, fix, who)

    def who(self) -> str:
        """``<kind> "<id>"`` for the id the line gives itself, "" if it gives none usable."""
        for key in ("question_id", "id") if self.kind == "question" else ("id",):
            value = self.obj.get(key)
            if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
                return f"{self.kind} {quote(str(value))}"
        return ""


def quote(value: str) -> str:
    """``value`` in double quotes, JSON-escaped (a lone surrogate is shown as ``\\udXXX``)."""
    ascii_only = unicode_problem(value) is not None
    return json.dumps(value, ensure_ascii=ascii_only)


def user_error(path: Path, number: int | None, what: str, fix: str, who: str = "") -> UserDataError:
    """The one-line error ``<file>:<line>: <what> (<who>); <fix>`` (no line: ``<file>: ...``)."""
    where = f"{path}:{number}" if number is not None else f"{path}"
    return UserDataError(f"{where}: {what}{f' ({who})' if who else ''}; {fix}")


def closest(value: str, choices: list[str]) -> str | None:
    """The choice most like ``value`` by rapidfuzz ``fuzz.ratio`` if it reaches SUGGEST_MIN_RATIO."""
    match = process.extractOne(value, choices, scorer=fuzz.ratio, score_cutoff=SUGGEST_MIN_RATIO)
    return None if match is None else str(match[0])


def _did_you_mean(value: str, choices: list[str]) -> str:
    near = closest(value, choices)
    return f"did you mean {quote(near)}? otherwise " if near is not None else ""


# ---------------------------------------------------------------- reading lines
def read_jsonl(path: Path, kind: str, fields: tuple[str, ...]) -> Iterator[Line]:
    """Each non-blank line of ``path`` as a :class:`Line` holding a JSON object.

    Lines are split on ``\\n`` and numbered from 1; a byte-order mark at the start of the file
    is dropped. Bytes that are not UTF-8, invalid JSON and a value that is not an object raise
    :class:`UserDataError` naming the line.
    """
    if not path.is_file():
        raise UserDataError(f"{path}: no such file; check the path given on the command line")
    offset = 0
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            text = _decode(path, number, raw, offset, kind)
            offset += len(raw)
            if text.strip():
                yield Line(path, number, _parse(path, number, text, kind), kind, fields)


def _decode(path: Path, number: int, raw: bytes, offset: int, kind: str) -> str:
    if number == 1 and raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
        offset += len(codecs.BOM_UTF8)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        column = len(raw[:exc.start].decode("utf-8")) + 1
        who = _id_in_text(raw.decode("utf-8", errors="replace"), kind)
        raise user_error(
            path, number,
            f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at column {column} (byte offset "
            f"{offset + exc.start} of the file)",
            "save the file as UTF-8, e.g. `iconv -f latin1 -t utf-8 in.jsonl > out.jsonl` if it is "
            "Latin-1", who) from None


def _parse(path: Path, number: int, text: str, kind: str) -> dict[str, Any]:
    text = text.rstrip("\r\n")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        at = "the end of the line" if exc.pos >= len(text) else f"column {exc.colno}"
        raise user_error(
            path, number, f"not valid JSON: {exc.msg} at {at}",
            "write one complete JSON object per line (a value spanning several lines must be "
            "joined into one)", _id_in_text(text, kind)) from None
    if not isinstance(obj, dict):
        raise user_error(path, number, f"expected a JSON object {{...}}, got a {_json_kind(obj)}",
                         f"write one object per line, e.g. {_example(kind)}")
    return obj


def _id_in_text(text: str, kind: str) -> str:
    """``<kind> "<id>"`` if the (unparsable) line spells an id, else ""; gold lines name the question."""
    match = _ID_IN_TEXT.search(text)
    if match is None:
        return ""
    try:
        value = json.loads(match.group(1))
    except json.JSONDecodeError:
        return ""
    return f"{'question' if kind == 'gold' else kind} {quote(str(value))}"


def _json_kind(value: Any) -> str:
    names = {list: "list", str: "string", bool: "boolean", int: "number", float: "number",
             type(None): "null", dict: "object"}
    return names[type(value)]


def _example(kind: str) -> str:
    return {"passage": '{"id": "d1", "title": "...", "text": "..."}',
            "question": '{"id": "q1", "question": "...", "answers": ["..."]}',
            "gold": '{"question_id": "q1", "passage_id": "d1"}'}[kind]


# ---------------------------------------------------------------- fields
def text_field(line: Line, key: str, required: bool = True) -> str | None:
    """``line.obj[key]``: a non-empty, valid-Unicode string; ``None`` if absent and not required."""
    if key not in line.obj or line.obj[key] is None:
        if not required:
            return None
        got = "got null" if key in line.obj else f"the line has no {key!r}{_similar_key(line, key)}"
        raise line.error(f"field {key!r} must be a non-empty string, but {got}",
                         f"add \"{key}\": \"...\" to the line")
    value = line.obj[key]
    if not isinstance(value, str):
        raise line.error(f"field {key!r} must be a non-empty string, got a {_json_kind(value)} "
                         f"({json.dumps(value)[:60]})", f"write {key!r} as a JSON string")
    if not value.strip():
        raise line.error(f"field {key!r} must be a non-empty string, got {quote(value)}",
                         f"fill in {key!r} or remove the line")
    _check_unicode(line, key, value)
    return value


def optional_string(line: Line, key: str) -> str:
    """``line.obj[key]`` if it is a (possibly empty) valid-Unicode string; "" if absent or null."""
    value = line.obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise line.error(f"field {key!r} must be a string, got a {_json_kind(value)} "
                         f"({json.dumps(value)[:60]})", f"write {key!r} as a JSON string or leave it out")
    _check_unicode(line, key, value)
    return value


def _similar_key(line: Line, key: str) -> str:
    unknown = [k for k in line.obj if k not in line.fields]
    near = closest(key, unknown) if unknown else None
    return f" (is {quote(near)} a misspelling of it?)" if near is not None else ""


def _check_unicode(line: Line, key: str, value: str) -> None:
    problem = unicode_problem(value)
    if problem is not None:
        raise line.error(f"field {key!r} is not valid Unicode: {problem}",
                         "remove the unpaired \\ud800-\\udfff escape or add its other half")


def id_field(line: Line, key: str, default: str | None = None) -> str:
    """``line.obj[key]`` as an id: a non-empty string or an integer (used as its decimal string)."""
    if key not in line.obj and default is not None:
        return default
    value = line.obj.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if value is None or not isinstance(value, str):
        got = f"got a {_json_kind(value)}" if key in line.obj else f"the line has no {key!r}"
        raise line.error(f"field {key!r} must be a string or integer id, but {got}",
                         f"give the line \"{key}\": \"<id>\"", who="")
    if not value.strip():
        raise line.error(f"field {key!r} is an empty id", f"give the line a non-empty {key!r}", who="")
    _check_unicode(line, key, value)
    return value


def string_list(line: Line, key: str) -> list[str]:
    """``line.obj[key]``: a list of non-empty strings (one string counts as a list of one); [] if absent."""
    value = line.obj.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise line.error(f"field {key!r} must be a list of non-empty strings, got "
                         f"{json.dumps(value)[:80]}", f"write {key!r} as [\"...\", ...]")
    for item in value:
        _check_unicode(line, key, item)
    return list(value)


def id_list(line: Line, key: str) -> list[str]:
    """``line.obj[key]``: a list of ids (strings or integers; one id counts as a list of one)."""
    value = line.obj.get(key, [])
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        value = [value]
    ok = isinstance(value, list) and all(
        (isinstance(v, str) and v.strip()) or (isinstance(v, int) and not isinstance(v, bool))
        for v in value)
    if not ok:
        raise line.error(f"field {key!r} must be a list of passage ids, got {json.dumps(value)[:80]}",
                         f"write {key!r} as [\"d1\", ...] with ids from the corpus file")
    for item in value:
        if isinstance(item, str):
            _check_unicode(line, key, item)
    return [str(v) for v in value]


# ---------------------------------------------------------------- the three files
def read_corpus(path: Path) -> tuple[pl.DataFrame, dict[str, Passage]]:
    """The corpus table and, per user passage id in file order, its line and content hash.

    Rules: ``title`` and ``text`` are required; ids are unique; no two lines share (title,
    text) (their content hashes would collide); ``text`` is at most
    :data:`evichain.data.schema.MAX_PASSAGE_CHARS` characters.
    """
    passages: dict[str, Passage] = {}
    by_hash: dict[str, Passage] = {}
    pairs: list[tuple[str, str]] = []
    for line in read_jsonl(path, "passage", _CORPUS_FIELDS):
        user_id = id_field(line, "id", default=f"L{line.number}")
        title, text = text_field(line, "title"), text_field(line, "text")
        assert title is not None and text is not None  # required fields
        who = f"passage {quote(user_id)}"
        _check_new_passage_id(line, user_id, passages)
        problem = overlong_passage(text)
        if problem is not None:
            raise line.error(f"'text' {problem}",
                             "split the document into passages of at most that length", who)
        pid = passage_id(title, text)
        if pid in by_hash:
            first = by_hash[pid]
            raise line.error(
                f"passage {quote(user_id)} has the same title and text as passage "
                f"{quote(first.user_id)} on line {first.line}",
                f"remove one of the two lines and point gold at {quote(first.user_id)}", who="")
        passages[user_id] = by_hash[pid] = Passage(user_id, line.number, pid)
        pairs.append((title, text))
    if not pairs:
        raise user_error(path, None, "no passages (the file is empty or has only blank lines)",
                         f"write one passage per line, e.g. {_example('passage')}")
    return corpus_table(pairs), passages


def _check_new_passage_id(line: Line, user_id: str, passages: dict[str, Passage]) -> None:
    if user_id not in passages:
        return
    implicit = "" if "id" in line.obj else f" (given to line {line.number}, which has no \"id\")"
    raise line.error(f"passage id {quote(user_id)}{implicit} already used on line "
                     f"{passages[user_id].line}", "give each passage its own id", who="")


def _unknown_passage(line: Line, user_pid: str, qid: str, passages: dict[str, Passage],
                     corpus_path: Path) -> UserDataError:
    hint = _did_you_mean(user_pid, list(passages))
    return line.error(
        f"gold passage {quote(user_pid)} of question {quote(qid)} is not an id in {corpus_path}",
        f"{hint}use a passage id from {corpus_path}", who="")


def read_gold(path: Path, passages: dict[str, Passage],
              corpus_path: Path) -> dict[str, list[tuple[int, str]]]:
    """question_id -> ``(gold file line, passage_id)`` per gold passage, in file order."""
    gold: dict[str, list[tuple[int, str]]] = {}
    for line in read_jsonl(path, "gold", _GOLD_FIELDS):
        qid, user_pid = id_field(line, "question_id"), id_field(line, "passage_id")
        if user_pid not in passages:
            raise _unknown_passage(line, user_pid, qid, passages, corpus_path)
        gold.setdefault(qid, []).append((line.number, passages[user_pid].passage_id))
    return gold


def read_questions(path: Path, passages: dict[str, Passage], gold: dict[str, list[tuple[int, str]]],
                   corpus_path: Path) -> list[dict[str, Any]]:
    """Question records in the schema of :func:`evichain.data.schema.questions_table`.

    Rules: a question id (``question_id``, else ``id``) and ``question`` are required; ids are
    unique; inline ``gold`` ids must be passage ids of the corpus file.
    """
    records: list[dict[str, Any]] = []
    first_line: dict[str, int] = {}
    for line in read_jsonl(path, "question", _QUESTION_FIELDS):
        qid = id_field(line, "question_id" if "question_id" in line.obj else "id")
        if qid in first_line:
            raise line.error(f"question id {quote(qid)} already used on line {first_line[qid]}",
                             "give each question its own id", who="")
        first_line[qid] = line.number
        records.append(_question_record(line, qid, passages, gold, corpus_path))
    if not records:
        raise user_error(path, None, "no questions (the file is empty or has only blank lines)",
                         f"write one question per line, e.g. {_example('question')}")
    return records


def _question_record(line: Line, qid: str, passages: dict[str, Passage],
                     gold: dict[str, list[tuple[int, str]]], corpus_path: Path) -> dict[str, Any]:
    inline = id_list(line, "gold")
    for user_pid in inline:
        if user_pid not in passages:
            raise _unknown_passage(line, user_pid, qid, passages, corpus_path)
    ids = [passages[g].passage_id for g in inline] + [pid for _, pid in gold.get(qid, [])]
    return {"question_id": qid, "question": text_field(line, "question"),
            "answers": list(dict.fromkeys(string_list(line, "answers"))),
            "gold_passage_ids": list(dict.fromkeys(ids)),
            "type": optional_string(line, "type"),
            "n_hops": 0, "gold_reliable": True}


def _check_gold_questions(gold_path: Path, gold: dict[str, list[tuple[int, str]]],
                          records: list[dict[str, Any]], questions_path: Path) -> None:
    known = [r["question_id"] for r in records]
    known_set = set(known)
    for qid, rows in gold.items():
        if qid not in known_set:
            hint = _did_you_mean(qid, known)
            raise user_error(gold_path, rows[0][0],
                             f"question {quote(qid)} is not a question id in {questions_path}",
                             f"{hint}use a question id from {questions_path}")


def load_user_dataset(corpus: Path, questions: Path, gold: Path | None = None) -> UserDataset:
    """Read, convert and validate a user's files (see the module docstring for the formats)."""
    corpus, questions = Path(corpus), Path(questions)
    corpus_df, passages = read_corpus(corpus)
    gold_map = read_gold(Path(gold), passages, corpus) if gold is not None else {}
    records = read_questions(questions, passages, gold_map, corpus)
    if gold is not None:
        _check_gold_questions(Path(gold), gold_map, records, questions)
    questions_df = questions_table(records)
    try:
        validate_corpus(corpus_df)
        validate_questions(questions_df, corpus_df, require_answers=False)
    except ValueError as exc:
        raise UserDataError(f"{corpus} / {questions}: {_user_ids_for_hashes(str(exc), passages, corpus)}"
                            "; this should have been caught line by line, please report it") from None
    id_map = pd.DataFrame({"passage_id": [p.passage_id for p in passages.values()],
                           "user_id": list(passages)})
    return UserDataset(as_pandas(corpus_df), as_pandas(questions_df), id_map)


def _user_ids_for_hashes(message: str, passages: dict[str, Passage], corpus: Path) -> str:
    """``message`` with each content-hash passage id replaced by the user's id and line."""
    by_hash = {p.passage_id: p for p in passages.values()}

    def name(match: re.Match[str]) -> str:
        p = by_hash.get(match.group(0))
        return match.group(0) if p is None else f"passage {quote(p.user_id)} ({corpus}:{p.line})"

    return _HASH.sub(name, message)
