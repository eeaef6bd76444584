"""Users' own JSONL files: conversion to the pipeline's tables and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evichain.data.schema import passage_id
from evichain.data.user import UserDataError, load_user_dataset


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows),
                    encoding="utf-8")
    return path


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    corpus = _write(tmp_path / "corpus.jsonl", [
        {"id": "d1", "title": "Lothair II", "text": "Lothair II was the son of Ermengarde of Tours."},
        {"id": "d2", "title": "Ermengarde of Tours", "text": "Ermengarde of Tours died on 20 March 851."},
        {"id": "d3", "title": "Lothair I", "text": "Lothair I was emperor of the Franks."},
    ])
    questions = _write(tmp_path / "questions.jsonl", [
        {"id": "q1", "question": "When did Lothair II's mother die?", "answers": ["20 March 851"]},
        {"question_id": "q2", "question": "Who was emperor of the Franks?", "gold": ["d3"]},
    ])
    gold = _write(tmp_path / "gold.jsonl", [
        {"question_id": "q1", "passage_id": "d1"}, {"question_id": "q1", "passage_id": "d2"},
    ])
    return {"corpus": corpus, "questions": questions, "gold": gold}


def test_tables_ids_and_gold(files: dict[str, Path]) -> None:
    data = load_user_dataset(files["corpus"], files["questions"], files["gold"])
    assert list(data.corpus["title"]) == ["Lothair II", "Ermengarde of Tours", "Lothair I"]
    p1 = passage_id("Lothair II", "Lothair II was the son of Ermengarde of Tours.")
    assert data.corpus["passage_id"].iloc[0] == p1
    gold = dict(zip(data.questions["question_id"], data.questions["gold_passage_ids"]))
    assert gold["q1"][0] == p1 and len(gold["q1"]) == 2
    assert len(gold["q2"]) == 1
    assert data.has_gold and data.has_answers
    assert list(data.questions["answers"].iloc[1]) == []  # answers are optional for users' data
    run = data.corpus[["passage_id"]].assign(rank=1)
    assert list(data.to_user_ids(run)["passage_id"]) == ["d1", "d2", "d3"]


def test_without_gold_file(files: dict[str, Path]) -> None:
    data = load_user_dataset(files["corpus"], files["questions"])
    assert list(data.questions["gold_passage_ids"].iloc[0]) == []


@pytest.mark.parametrize(("which", "rows", "message"), [
    ("corpus", ['{"id": "d1", "title": "A", "text": "x"', ], "corpus.jsonl:1: not valid JSON"),
    ("corpus", [{"id": "d1", "title": "A"}], "corpus.jsonl:1: field 'text' must be a non-empty string"),
    ("corpus", [{"id": "d1", "title": "A", "text": "x"}, {"id": "d1", "title": "B", "text": "y"}],
     "corpus.jsonl:2: duplicate passage id 'd1'"),
    ("corpus", [["not", "an", "object"]], "expected a JSON object, got list"),
    ("corpus", [], "no passages"),
    ("questions", [{"id": "q1"}], "questions.jsonl:1: field 'question' must be a non-empty string"),
    ("questions", [{"id": "q1", "question": "?", "gold": ["nope"]}],
     "gold passage id(s) ['nope'] are not ids in the corpus file"),
    ("questions", [{"id": "q1", "question": "?", "answers": [3]}], "field 'answers' must be a list"),
    ("gold", [{"question_id": "q1", "passage_id": "zz"}], "gold.jsonl:1: passage_id 'zz' is not an id"),
    ("gold", [{"question_id": "q9", "passage_id": "d1"}], "question_id(s) ['q9'] are not in"),
])
def test_malformed_files_are_named(files: dict[str, Path], which: str, rows: list[object],
                                   message: str) -> None:
    _write(files[which], rows)
    with pytest.raises(UserDataError, match=None) as info:
        load_user_dataset(files["corpus"], files["questions"], files["gold"])
    assert message in str(info.value)


def test_missing_file(tmp_path: Path, files: dict[str, Path]) -> None:
    with pytest.raises(UserDataError, match="no such file"):
        load_user_dataset(tmp_path / "absent.jsonl", files["questions"])
