"""Users' own data: JSONL corpus, questions and optional gold, read into the two tables.

File formats (UTF-8, one JSON object per line, blank lines ignored):

- corpus: ``{"id": str, "title": str, "text": str}``; ``id`` is the user's own passage id
  (optional: without it the line number, ``"L<n>"``, is the id). The pipeline's ``passage_id``
  stays the content hash of ``(title, text)`` (:func:`evichain.data.schema.passage_id`); the
  user's ids are kept in an id map so every output can be written back in them.
- questions: ``{"id" | "question_id": str, "question": str, "answers": [str]?,
  "gold": [passage id]?}``; ``answers`` (optional) enable the reader's EM/F1, ``gold`` the
  retrieval metrics.
- gold (optional, ``--gold``): ``{"question_id": str, "passage_id": str}``, one line per gold
  passage of a question in supporting order; it adds to a question's inline ``gold``.

Every problem raises :class:`UserDataError` naming the file and line and what to fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from evichain.data.schema import (
    make_corpus,
    make_questions,
    passage_id,
    validate_corpus,
    validate_questions,
)
from evichain.data.sources import SourceDataError


class UserDataError(SourceDataError, ValueError):
    """A user's corpus, questions or gold file is missing or malformed."""


@dataclass(frozen=True)
class UserDataset:
    """A user's data as the pipeline's tables plus the map back to the user's passage ids."""

    corpus: pd.DataFrame
    questions: pd.DataFrame
    id_map: pd.DataFrame  # passage_id (content hash) -> user_id

    @property
    def has_gold(self) -> bool:
        return bool(self.questions["gold_passage_ids"].map(len).gt(0).any())

    @property
    def has_answers(self) -> bool:
        return bool(self.questions["answers"].map(len).gt(0).any())

    def to_user_ids(self, run: pd.DataFrame) -> pd.DataFrame:
        """``run`` with its ``passage_id`` column replaced by the user's ids."""
        mapping = dict(zip(self.id_map["passage_id"], self.id_map["user_id"]))
        return run.assign(passage_id=run["passage_id"].map(mapping))


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line of ``path``."""
    if not path.is_file():
        raise UserDataError(f"{path}: no such file")
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserDataError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise UserDataError(f"{path}:{number}: expected a JSON object, got "
                                    f"{type(obj).__name__}")
            yield number, obj


def _text_field(obj: dict[str, Any], key: str, where: str, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise UserDataError(f"{where}: field {key!r} must be a non-empty string, got {value!r}")
    return value


def _string_list(obj: dict[str, Any], key: str, where: str) -> list[str]:
    value = obj.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise UserDataError(f"{where}: field {key!r} must be a list of non-empty strings, got {value!r}")
    return list(value)


def read_corpus(path: Path) -> tuple[pd.DataFrame, dict[str, str]]:
    """The corpus table and the map user id -> passage_id (content hash)."""
    user_to_pid: dict[str, str] = {}
    pairs: list[tuple[str, str]] = []
    for number, obj in read_jsonl(path):
        where = f"{path}:{number}"
        title, text = _text_field(obj, "title", where), _text_field(obj, "text", where)
        assert title is not None and text is not None
        user_id = obj.get("id", f"L{number}")
        if not isinstance(user_id, (str, int)) or isinstance(user_id, bool):
            raise UserDataError(f"{where}: field 'id' must be a string, got {user_id!r}")
        user_id = str(user_id)
        if user_id in user_to_pid:
            raise UserDataError(f"{where}: duplicate passage id {user_id!r}")
        pid = passage_id(title, text)
        if pid in user_to_pid.values():
            raise UserDataError(f"{where}: passage {user_id!r} repeats the title and text of an "
                                "earlier line; remove one of them")
        user_to_pid[user_id] = pid
        pairs.append((title, text))
    if not pairs:
        raise UserDataError(f"{path}: no passages")
    return make_corpus(pairs), user_to_pid


def read_gold(path: Path, user_to_pid: dict[str, str]) -> dict[str, list[str]]:
    """question_id -> gold passage_ids (content hashes), in file order."""
    gold: dict[str, list[str]] = {}
    for number, obj in read_jsonl(path):
        where = f"{path}:{number}"
        qid = str(_text_field(obj, "question_id", where))
        user_pid = str(obj.get("passage_id", ""))
        if user_pid not in user_to_pid:
            raise UserDataError(f"{where}: passage_id {user_pid!r} is not an id in the corpus file")
        gold.setdefault(qid, []).append(user_to_pid[user_pid])
    return gold


def read_questions(path: Path, user_to_pid: dict[str, str],
                   gold: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Question records in the schema of :func:`evichain.data.schema.make_questions`."""
    records: list[dict[str, Any]] = []
    for number, obj in read_jsonl(path):
        where = f"{path}:{number}"
        qid = _text_field(obj, "question_id", where, required=False) or _text_field(obj, "id", where)
        inline = _string_list(obj, "gold", where)
        unknown = [g for g in inline if g not in user_to_pid]
        if unknown:
            raise UserDataError(f"{where}: gold passage id(s) {unknown} are not ids in the corpus file")
        ids = list(dict.fromkeys([user_to_pid[g] for g in inline] + gold.get(str(qid), [])))
        records.append({"question_id": qid, "question": _text_field(obj, "question", where),
                        "answers": list(dict.fromkeys(_string_list(obj, "answers", where))),
                        "gold_passage_ids": ids, "type": str(obj.get("type", "")),
                        "n_hops": 0, "gold_reliable": True})
    if not records:
        raise UserDataError(f"{path}: no questions")
    return records


def load_user_dataset(corpus: Path, questions: Path, gold: Path | None = None) -> UserDataset:
    """Read, convert and validate a user's files (see the module docstring for the formats)."""
    corpus_df, user_to_pid = read_corpus(Path(corpus))
    gold_map = read_gold(Path(gold), user_to_pid) if gold is not None else {}
    records = read_questions(Path(questions), user_to_pid, gold_map)
    known = {r["question_id"] for r in records}
    stray = sorted(set(gold_map) - known)
    if stray:
        raise UserDataError(f"{gold}: question_id(s) {stray[:5]} are not in {questions}")
    questions_df = make_questions(records)
    try:
        validate_corpus(corpus_df)
        validate_questions(questions_df, corpus_df, require_answers=False)
    except ValueError as exc:
        raise UserDataError(f"{corpus} / {questions}: {exc}") from None
    id_map = pd.DataFrame({"passage_id": list(user_to_pid.values()),
                           "user_id": list(user_to_pid)})
    return UserDataset(corpus_df, questions_df, id_map)
