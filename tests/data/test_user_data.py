"""Users' own JSONL files: conversion to the pipeline's tables and clear errors."""

from __future__ import annotations

import codecs
import json
import re
from pathlib import Path

import pytest

from evichain.data.schema import MAX_PASSAGE_CHARS, passage_id
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
     'corpus.jsonl:2: passage id "d1" already used on line 1'),
    ("corpus", [["not", "an", "object"]], "expected a JSON object {...}, got a list"),
    ("corpus", [], "no passages"),
    ("questions", [{"id": "q1"}], "questions.jsonl:1: field 'question' must be a non-empty string"),
    ("questions", [{"id": "q1", "question": "?", "gold": ["nope"]}],
     'questions.jsonl:1: gold passage "nope" of question "q1" is not an id'),
    ("questions", [{"id": "q1", "question": "?", "answers": [3]}], "field 'answers' must be a list"),
    ("gold", [{"question_id": "q1", "passage_id": "zz"}], 'gold.jsonl:1: gold passage "zz" of question'),
    ("gold", [{"question_id": "q9", "passage_id": "d1"}], 'gold.jsonl:1: question "q9" is not a question id'),
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


# ---------------------------------------------------------------- one message per problem (issue 61)
_HASH = re.compile(r"p[0-9a-f]{16}")


def _error(files: dict[str, Path], gold: bool = True) -> str:
    """The one-line message of the UserDataError that loading ``files`` raises."""
    with pytest.raises(UserDataError) as info:
        load_user_dataset(files["corpus"], files["questions"], files["gold"] if gold else None)
    message = str(info.value)
    assert "\n" not in message and "; " in message  # one line: what is wrong; how to fix
    assert not _HASH.search(message), message  # never the content hashes
    return message


def _append(path: Path, *rows: object) -> None:
    with path.open("ab") as fh:
        for row in rows:
            fh.write(row if isinstance(row, bytes) else json.dumps(row).encode("utf-8"))
            fh.write(b"\n")


def test_non_utf8_names_line_column_and_byte_offset(files: dict[str, Path]) -> None:
    before = files["corpus"].stat().st_size
    _append(files["corpus"], b'{"id": "d4", "title": "Caf\xe9", "text": "x"}')
    message = _error(files)
    assert message.startswith(f"{files['corpus']}:4: not UTF-8 text: byte 0xe9 at column 27 ")
    assert f"(byte offset {before + 26} of the file)" in message and 'passage "d4"' in message
    assert "save the file as UTF-8" in message


def test_invalid_json_names_line_and_id(files: dict[str, Path]) -> None:
    _append(files["questions"], b'{"id": "q3", "question": "?"')
    message = _error(files)
    assert message.startswith(f"{files['questions']}:3: not valid JSON: ")
    assert 'question "q3"' in message


def test_a_line_that_is_not_an_object(files: dict[str, Path]) -> None:
    _append(files["corpus"], ["d4", "A", "x"])
    message = _error(files)
    assert message.startswith(f"{files['corpus']}:4: expected a JSON object {{...}}, got a list; ")


def test_missing_field_is_named(files: dict[str, Path]) -> None:
    _append(files["corpus"], {"id": "d4", "title": "A", "txt": "x"})
    message = _error(files)
    assert message.startswith(f"{files['corpus']}:4: field 'text' must be a non-empty string, but the "
                              "line has no 'text'")
    assert '"txt" a misspelling' in message and 'passage "d4"' in message


def test_empty_field_is_named(files: dict[str, Path]) -> None:
    _append(files["questions"], {"id": "q3", "question": "  "})
    message = _error(files)
    assert message.startswith(f"{files['questions']}:3: field 'question' must be a non-empty string, "
                              'got "  " (question "q3"); ')


def test_wrong_type_is_named(files: dict[str, Path]) -> None:
    _append(files["corpus"], {"id": "d4", "title": 7, "text": "x"})
    message = _error(files)
    assert message.startswith(f"{files['corpus']}:4: field 'title' must be a non-empty string, got a "
                              'number (7) (passage "d4"); ')


def test_lone_surrogate_is_named(files: dict[str, Path]) -> None:
    _append(files["corpus"], b'{"id": "d4", "title": "A", "text": "\\ud800"}')
    message = _error(files)
    assert message.startswith(f"{files['corpus']}:4: field 'text' is not valid Unicode")
    assert 'passage "d4"' in message


def test_duplicate_passage_id_names_both_lines(files: dict[str, Path]) -> None:
    _append(files["corpus"], {"id": "d2", "title": "Other", "text": "other"})
    message = _error(files)
    assert message.startswith(f'{files["corpus"]}:4: passage id "d2" already used on line 2; ')


def test_duplicate_question_id_names_both_lines(files: dict[str, Path]) -> None:
    _append(files["questions"], {"question_id": "q1", "question": "Again?"})
    message = _error(files)
    assert message.startswith(f'{files["questions"]}:3: question id "q1" already used on line 1; ')


def test_duplicate_content_names_both_ids_and_lines(files: dict[str, Path]) -> None:
    same = {"title": "Lothair I", "text": "Lothair I was emperor of the Franks."}
    _append(files["corpus"], {"id": "d4", **same})
    message = _error(files)
    assert message.startswith(f'{files["corpus"]}:4: passage "d4" has the same title and text as '
                              'passage "d3" on line 3; ')


def test_overlong_passage_states_the_limit_and_its_source(files: dict[str, Path]) -> None:
    _append(files["corpus"], {"id": "d4", "title": "Long", "text": "x" * (MAX_PASSAGE_CHARS + 1)})
    message = _error(files)
    assert message.startswith(f"{files['corpus']}:4: 'text' has {MAX_PASSAGE_CHARS + 1:,} characters")
    assert f"{MAX_PASSAGE_CHARS:,}-character limit" in message and "MAX_PASSAGE_CHARS" in message
    assert 'passage "d4"' in message and "split the document into passages" in message


def test_gold_file_unknown_passage_suggests_the_closest_id(files: dict[str, Path]) -> None:
    _append(files["gold"], {"question_id": "q2", "passage_id": "d33"})
    message = _error(files)
    assert message.startswith(f'{files["gold"]}:3: gold passage "d33" of question "q2" is not an id in '
                              f'{files["corpus"]}; did you mean "d3"?')


def test_inline_gold_unknown_passage_without_a_close_id(files: dict[str, Path]) -> None:
    _append(files["questions"], {"id": "q3", "question": "?", "gold": ["zz-top"]})
    message = _error(files)
    assert message.startswith(f'{files["questions"]}:3: gold passage "zz-top" of question "q3" is not '
                              f'an id in {files["corpus"]}; use a passage id')
    assert "did you mean" not in message


def test_gold_for_an_unknown_question(files: dict[str, Path]) -> None:
    _append(files["gold"], {"question_id": "q22", "passage_id": "d1"})
    message = _error(files)
    assert message.startswith(f'{files["gold"]}:3: question "q22" is not a question id in '
                              f'{files["questions"]}; did you mean "q2"?')


def test_passages_without_id_are_numbered_by_line(files: dict[str, Path]) -> None:
    _append(files["corpus"], {"title": "New", "text": "new"})
    data = load_user_dataset(files["corpus"], files["questions"])
    assert list(data.id_map["user_id"]) == ["d1", "d2", "d3", "L4"]


def test_integer_ids_and_a_byte_order_mark_are_accepted(files: dict[str, Path]) -> None:
    files["corpus"].write_bytes(codecs.BOM_UTF8 + b'{"id": 1, "title": "A", "text": "x"}\n')
    _write(files["questions"], [{"id": 7, "question": "?", "gold": [1]}])
    data = load_user_dataset(files["corpus"], files["questions"])
    assert list(data.id_map["user_id"]) == ["1"] and list(data.questions["question_id"]) == ["7"]
    assert list(data.questions["gold_passage_ids"].iloc[0]) == [passage_id("A", "x")]


def test_null_field_is_named(files: dict[str, Path]) -> None:
    _append(files["corpus"], {"id": "d4", "title": None, "text": "x"})
    message = _error(files)
    assert message.startswith(f"{files['corpus']}:4: field 'title' must be a non-empty string, but got "
                              'null (passage "d4"); ')
