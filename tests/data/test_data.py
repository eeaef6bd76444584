"""Tests of the data layer (evichain.data): fixtures written to tmp_path, plus one real-data check."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from evichain.config import DataParams
from evichain.data import demo, hotpotqa, medical, musique, twowiki
from evichain.data.prepare import prepare_dataset, source_files
from evichain.data.schema import (
    CORPUS_COLUMNS,
    QUESTIONS_COLUMNS,
    as_pandas,
    corpus_table,
    make_corpus,
    passage_id,
    validate_corpus,
    validate_questions,
)
from evichain.data.sources import (
    ChecksumMismatchError,
    MalformedSourceError,
    MissingSourceError,
    verify_sources,
    write_checksums,
)
from evichain.io import read_table, write_parquet

REPO_DATA = Path(__file__).resolve().parents[2] / "data"

TWOWIKI_CORPUS = [
    {"title": "Alpha Film", "text": "Alpha Film is a film directed by Bo Ray."},
    {"title": "Bo Ray", "text": "Bo Ray was born in Cville."},
    {"title": "Dup", "text": "Dup one."},
    {"title": "Dup", "text": "Dup two."},
    {"title": "Other", "text": "Other text."},
    {"title": "Alpha Film", "text": "Alpha Film is a film directed by Bo Ray."},
]


def _twowiki_record(
    qid: str, titles_texts: list[tuple[str, str]], reliable: Any = True, **kw: Any
) -> dict[str, Any]:
    return {
        "_id": qid,
        "type": kw.get("type", "compositional"),
        "question": kw.get("question", f"Question {qid}?"),
        "answer": kw.get("answer", "Cville"),
        "supporting_facts": [[t, 0] for t, _ in titles_texts],
        "context": [[t, [x]] for t, x in titles_texts],
        "evidences": [["s", "r", "o"]] * kw.get("n_ev", len(titles_texts)),
        "gold_reliable": reliable,
        "gold_title_methods": ["title_exact"] * len(titles_texts),
    }


def _set(df: pl.DataFrame, row: int, col: str, value: Any) -> pl.DataFrame:
    """``df`` with cell (``row``, ``col``) replaced by ``value`` (the column keeps its type)."""
    values = df[col].to_list()
    values[row] = value
    return df.with_columns(pl.Series(col, values, dtype=df[col].dtype))


def _write_json(root: Path, rel: str, obj: Any) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    return path


def _twowiki_fixture(root: Path, records: list[dict] | None = None) -> Path:
    if records is None:
        records = [
            _twowiki_record(
                "q1",
                [("Alpha Film", TWOWIKI_CORPUS[0]["text"]), ("Bo Ray", TWOWIKI_CORPUS[1]["text"])],
                question="Where was the director of film Alpha Film born, and is Other relevant?",
            ),
            _twowiki_record("q2", [("Dup", "Dup two.")], reliable="False", n_ev=2),
            _twowiki_record("q3", [("Dup", "dup   TWO.")], reliable="True"),
        ]
    _write_json(root, twowiki.CORPUS_FILE, TWOWIKI_CORPUS)
    _write_json(root, twowiki.QUESTIONS_FILE, records)
    return root


def _musique_fixture(root: Path) -> Path:
    shared = {"title": "Shared", "paragraph_text": "Shared paragraph.", "is_supporting": True}
    records = [
        {
            "id": "2hop__1_2",
            "question": "Q one?",
            "answer": "Ans",
            "answer_aliases": ["Ans", "Alias", ""],
            "answerable": True,
            "question_decomposition": [
                {"id": 1, "question": "a", "answer": "x", "paragraph_support_idx": 1},
                {"id": 2, "question": "b", "answer": "y", "paragraph_support_idx": 0},
            ],
            "paragraphs": [
                {"idx": 0, **shared},
                {"idx": 1, "title": "First", "paragraph_text": "First hop.", "is_supporting": True},
                {"idx": 2, "title": "Noise", "paragraph_text": "Noise.", "is_supporting": False},
            ],
        },
        {
            "id": "3hop1__3_4_5",
            "question": "Q two?",
            "answer": "B",
            "answer_aliases": [],
            "answerable": True,
            "question_decomposition": [{"paragraph_support_idx": 0}] * 3,
            "paragraphs": [
                {"idx": 0, **shared},
                {"idx": 1, "title": "Noise", "paragraph_text": "Noise.", "is_supporting": False},
            ],
        },
    ]
    _write_json(root, musique.FILE, records)
    return root


def _hotpot_lines() -> list[str]:
    def rec(qid: str, spans: list[str], sup: str) -> str:
        contexts = [
            {"id": "0", "title": "T1", "paragraph_text": "Text one.", "is_supporting": sup == "T1"},
            {"id": "1", "title": "T2", "paragraph_text": "Text two.", "is_supporting": True},
        ]
        answers = [{"number": "", "date": {}, "spans": spans}]
        record = {"question_id": qid, "question_text": f"{qid}?"}
        return json.dumps({**record, "answers_objects": answers, "contexts": contexts})

    return [rec("h1", ["yes"], "T1"), rec("h2", ["Paris", "paris", "Paris"], "none")]


def _hotpot_fixture(root: Path, lines: list[str] | None = None) -> Path:
    path = root / hotpotqa.FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines or _hotpot_lines()) + "\n", encoding="utf-8")
    return root


def _sentences(n: int) -> str:
    lengths = [3, 7, 12, 5, 9, 1, 15, 4]
    out = []
    for i in range(n):
        words = [f"w{i}_{j}" for j in range(lengths[i % len(lengths)])]
        out.append(" ".join(words) + ".")
    return " ".join(out)


def _medical_fixture(root: Path) -> Path:
    _write_json(root, medical.CORPUS_FILE, {"corpus_name": "Med", "context": _sentences(60)})
    questions = [
        {"id": f"Medical-{i}", "source": "Medical", "question": f"Q{i}?", "answer": f"A{i}",
         "question_type": "Fact Retrieval", "evidence": f"E{i}", "evidence_relations": ""}
        for i in range(4)
    ]
    _write_json(root, medical.QUESTIONS_FILE, questions)
    _write_json(root, medical.BALANCED_FILE, questions[:2])
    return root


# --- ids and schema ---------------------------------------------------------------------------


def test_passage_id_is_a_stable_content_hash() -> None:
    expected = "p" + hashlib.sha256("T\x1fbody".encode()).hexdigest()[:16]
    assert passage_id("T", "body") == expected == passage_id("T", "body")
    assert passage_id("T", "body") != passage_id("T", "body ")
    assert re.fullmatch(r"p[0-9a-f]{16}", expected)


def test_corpus_table_dedups_in_first_occurrence_order() -> None:
    corpus = corpus_table([("B", "x"), ("A", "y"), ("B", "x"), ("B", "z")])
    assert list(corpus.columns) == list(CORPUS_COLUMNS)
    assert corpus.select("title", "text").rows() == [("B", "x"), ("A", "y"), ("B", "z")]
    validate_corpus(corpus)


def test_pandas_wrappers_give_the_pandas_build(tmp_path: Path) -> None:
    """make_corpus, twowiki.convert and demo.convert (for scripts/drills) are the polars tables
    as pandas frames: str columns, Python lists, a fresh index."""
    pairs = [("B", "x"), ("A", "y"), ("B", "x")]
    pd.testing.assert_frame_equal(make_corpus(pairs), as_pandas(corpus_table(pairs)))
    assert [str(t) for t in make_corpus(pairs).dtypes] == ["str"] * 3
    _twowiki_fixture(tmp_path)
    corpus, questions = twowiki.convert(tmp_path)
    pd.testing.assert_frame_equal(corpus, as_pandas(twowiki.tables(tmp_path)[0]))
    pd.testing.assert_frame_equal(questions, as_pandas(twowiki.tables(tmp_path)[1]))
    assert questions["gold_passage_ids"].map(type).eq(list).all()
    assert [str(t) for t in questions.dtypes] == ["str", "str", "object", "object", "str", "int64",
                                                  "bool", "str"]
    demo_corpus, _ = demo.convert(tmp_path, n_questions=2)
    pd.testing.assert_frame_equal(demo_corpus, as_pandas(demo.tables(tmp_path, n_questions=2)[0]))


def test_conversion_is_deterministic_and_ids_shared_across_runs(tmp_path: Path) -> None:
    _twowiki_fixture(tmp_path)
    first, second = twowiki.tables(tmp_path), twowiki.tables(tmp_path)
    assert_frame_equal(first[0], second[0])
    assert_frame_equal(first[1], second[1])
    assert len(first[0]) == 5  # the repeated (title, text) is dropped
    assert first[0]["passage_id"][0] == passage_id("Alpha Film", TWOWIKI_CORPUS[0]["text"])


def test_validate_corpus_errors() -> None:
    good = corpus_table([("A", "x"), ("B", "y")])
    dup = pl.concat([good, good.head(1)])
    with pytest.raises(ValueError, match="duplicate passage_id"):
        validate_corpus(dup)
    with pytest.raises(ValueError, match="empty text"):
        validate_corpus(_set(good, 1, "text", "  "))
    with pytest.raises(ValueError, match="content hash"):
        validate_corpus(_set(good, 0, "passage_id", "p0000000000000000"))
    with pytest.raises(ValueError, match="columns"):
        validate_corpus(good.drop("title"))


def test_validate_questions_errors(tmp_path: Path) -> None:
    corpus, questions = twowiki.tables(_twowiki_fixture(tmp_path))
    validate_questions(questions, corpus, require_gold=True)
    with pytest.raises(ValueError, match="not in the corpus") as err:
        validate_questions(_set(questions, 0, "gold_passage_ids", ["pdeadbeefdeadbeef"]), corpus)
    assert "q1" in str(err.value)
    dup = pl.concat([questions, questions.head(1)])
    with pytest.raises(ValueError, match="duplicate question_id 'q1' \\(1 duplicate"):
        validate_questions(dup, corpus)
    with pytest.raises(ValueError, match="no answers"):
        validate_questions(_set(questions, 1, "answers", []), corpus)
    no_gold = _set(questions, 2, "gold_passage_ids", [])
    validate_questions(no_gold, corpus)
    with pytest.raises(ValueError, match="no gold"):
        validate_questions(no_gold, corpus, require_gold=True)
    with pytest.raises(ValueError, match="negative n_hops for 'q2'"):
        validate_questions(_set(questions, 1, "n_hops", -1), corpus)


def test_tables_survive_a_parquet_round_trip(tmp_path: Path) -> None:
    corpus, questions = twowiki.tables(_twowiki_fixture(tmp_path))
    write_parquet(corpus, tmp_path / "c.parquet")
    write_parquet(questions, tmp_path / "q.parquet")
    corpus2, questions2 = read_table(tmp_path / "c.parquet"), read_table(tmp_path / "q.parquet")
    assert list(questions2.columns) == list(QUESTIONS_COLUMNS)
    validate_corpus(corpus2)
    validate_questions(questions2, corpus2, require_gold=True)
    assert_frame_equal(questions2, questions, check_dtypes=False)


# --- 2Wiki gold resolution --------------------------------------------------------------------


def test_twowiki_gold_resolution(tmp_path: Path) -> None:
    corpus, questions = twowiki.tables(_twowiki_fixture(tmp_path))
    ids = {(title, text): pid for pid, title, text in corpus.iter_rows()}
    q = {row["question_id"]: row for row in questions.iter_rows(named=True)}
    assert q["q1"]["gold_passage_ids"] == [
        ids[("Alpha Film", TWOWIKI_CORPUS[0]["text"])],
        ids[("Bo Ray", TWOWIKI_CORPUS[1]["text"])],
    ]
    assert q["q2"]["gold_passage_ids"] == [ids[("Dup", "Dup two.")]]  # exact text match
    assert q["q3"]["gold_passage_ids"] == [ids[("Dup", "Dup two.")]]  # whitespace/case match
    assert questions["gold_reliable"].to_list() == [True, False, True]
    assert questions["n_hops"].to_list() == [2, 2, 1]
    assert q["q1"]["answers"] == ["Cville"] and q["q1"]["evidence"] == ""


def test_twowiki_missing_gold_title_names_question(tmp_path: Path) -> None:
    records = [_twowiki_record("qmissing42", [("Nowhere Page", "text")])]
    with pytest.raises(twowiki.GoldResolutionError) as err:
        twowiki.tables(_twowiki_fixture(tmp_path, records))
    assert "qmissing42" in str(err.value) and "Nowhere Page" in str(err.value)


def test_twowiki_ambiguous_gold_title_fails(tmp_path: Path) -> None:
    records = [_twowiki_record("qamb", [("Dup", "Dup three.")])]
    with pytest.raises(twowiki.GoldResolutionError, match="qamb.*ambiguous"):
        twowiki.tables(_twowiki_fixture(tmp_path, records))


# --- source files -----------------------------------------------------------------------------


def test_sha_mismatch_names_the_file(tmp_path: Path) -> None:
    _twowiki_fixture(tmp_path)
    write_checksums(tmp_path, twowiki.FILES)
    verify_sources(tmp_path, twowiki.FILES)
    (tmp_path / twowiki.CORPUS_FILE).write_text("[]", encoding="utf-8")
    with pytest.raises(ChecksumMismatchError) as err:
        verify_sources(tmp_path, twowiki.FILES)
    msg = str(err.value)
    assert twowiki.CORPUS_FILE in msg and "expected" in msg and "actual" in msg and "re-copy" in msg


def test_missing_and_unlisted_files(tmp_path: Path) -> None:
    _twowiki_fixture(tmp_path)
    with pytest.raises(MissingSourceError, match="SHA256SUMS"):
        verify_sources(tmp_path, twowiki.FILES)
    write_checksums(tmp_path, [twowiki.CORPUS_FILE])
    with pytest.raises(ChecksumMismatchError, match="no entry"):
        verify_sources(tmp_path, twowiki.FILES)
    with pytest.raises(MissingSourceError, match="musique_qa_100.json"):
        verify_sources(tmp_path, musique.FILES)


def test_malformed_json_names_the_file_and_position(tmp_path: Path) -> None:
    _twowiki_fixture(tmp_path)
    (tmp_path / twowiki.QUESTIONS_FILE).write_text('[{"_id": "q1",\n "question": }]', encoding="utf-8")
    with pytest.raises(MalformedSourceError) as err:
        twowiki.tables(tmp_path)
    assert "2wikimultihopqa_reconstructed.json" in str(err.value) and "line 2" in str(err.value)


def test_malformed_jsonl_names_the_line(tmp_path: Path) -> None:
    _hotpot_fixture(tmp_path, [_hotpot_lines()[0], '{"question_id": "h2", '])
    with pytest.raises(MalformedSourceError, match=r"dev_subsampled\.jsonl.*line 2"):
        hotpotqa.tables(tmp_path)


def test_missing_field_names_the_record(tmp_path: Path) -> None:
    record = _twowiki_record("qx", [("Other", "Other text.")])
    del record["question"]
    with pytest.raises(MalformedSourceError, match=r"record 0 \(qx\): missing field 'question'"):
        twowiki.tables(_twowiki_fixture(tmp_path, [record]))


# --- MuSiQue, HotpotQA ------------------------------------------------------------------------


def test_musique_dedup_gold_order_and_answers(tmp_path: Path) -> None:
    corpus, questions = musique.tables(_musique_fixture(tmp_path))
    assert corpus["title"].to_list() == ["Shared", "First", "Noise"]
    shared, first = passage_id("Shared", "Shared paragraph."), passage_id("First", "First hop.")
    assert questions["gold_passage_ids"].to_list() == [[first, shared], [shared]]
    assert questions["answers"].to_list() == [["Ans", "Alias"], ["B"]]
    assert questions["type"].to_list() == ["2hop", "3hop1"]
    assert questions["n_hops"].to_list() == [2, 3]
    validate_questions(questions, corpus, require_gold=True)


def test_hotpotqa_answers_gold_and_type(tmp_path: Path) -> None:
    corpus, questions = hotpotqa.tables(_hotpot_fixture(tmp_path))
    assert len(corpus) == 2
    assert questions["answers"].to_list() == [["yes"], ["Paris", "paris"]]
    t1, t2 = passage_id("T1", "Text one."), passage_id("T2", "Text two.")
    assert questions["gold_passage_ids"].to_list() == [[t1, t2], [t2]]
    assert set(questions["type"]) == {"hotpotqa"} and set(questions["n_hops"]) == {2}


# --- Medical chunking -------------------------------------------------------------------------


@pytest.mark.parametrize(("size", "overlap"), [(20, 5), (25, 0), (30, 29), (40, 10), (7, 3)])
def test_medical_chunk_spans_cover_overlap_and_snap(size: int, overlap: int) -> None:
    text = _sentences(80)
    words = list(re.finditer(r"\S+", text))
    ends = medical.sentence_ends(text, words)
    spans = medical.chunk_spans(ends, size, overlap)
    assert spans[0][0] == 0 and spans[-1][1] == len(words)
    for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
        assert s1 < s2 <= e1 < e2  # progress, no gap, no chunk inside another
        assert e1 - s2 <= overlap and (overlap == 0 or e1 - s2 >= 1)
    assert all(0 < e - s <= size for s, e in spans)
    prev_end = 0
    for s, e in spans[:-1]:  # an end is a sentence end unless none fits the allowed window
        window = range(max(s + size // 2, prev_end) + 1, s + size + 1)
        assert ends[e - 1] or (e - s == size and not any(ends[x - 1] for x in window))
        prev_end = e
    if size >= 20:  # sentences here are at most 15 words, so most chunks can end on one
        assert sum(ends[e - 1] for _, e in spans) > len(spans) // 2


def test_medical_chunk_text_covers_every_word() -> None:
    text = "Alpha beta.\nGamma delta epsilon. Zeta eta theta iota! Kappa lambda mu."
    chunks = medical.chunk_text(text, 5, 2)
    assert all(c.strip() for c in chunks)
    covered = [w for c in chunks for w in c.split()]
    assert set(covered) == set(text.split())
    assert chunks[0] == "Alpha beta.\nGamma delta epsilon."  # snapped to a full stop, line break kept


def test_medical_convert(tmp_path: Path) -> None:
    corpus, questions = medical.tables(_medical_fixture(tmp_path), chunk_words=30, overlap_words=5)
    titles = corpus["title"].to_list()
    assert titles[0] == "Med #0000" and titles[-1] == f"Med #{len(corpus) - 1:04d}"
    assert questions["evidence"].to_list() == [f"E{i}" for i in range(4)]
    assert all(g == [] for g in questions["gold_passage_ids"].to_list()) and set(questions["n_hops"]) == {0}
    assert medical.balanced_subset_ids(tmp_path) == ["Medical-0", "Medical-1"]
    validate_corpus(corpus)
    validate_questions(questions, corpus)


# --- demo and prepare -------------------------------------------------------------------------


def test_demo_slice_and_cap(tmp_path: Path) -> None:
    _twowiki_fixture(tmp_path)
    corpus, questions = demo.tables(tmp_path, n_questions=2)
    assert questions["question_id"].to_list() == ["q1", "q3"]  # q2 is unreliable
    assert corpus["title"].to_list() == ["Alpha Film", "Bo Ray", "Dup", "Other"]  # 2Wiki order
    capped, _ = demo.tables(tmp_path, n_questions=2, max_passages=3)
    assert "Other" not in capped["title"].to_list()
    with pytest.raises(ValueError, match="n_questions"):
        demo.tables(tmp_path, n_questions=2, max_passages=2)


def test_prepare_dataset_verifies_then_validates(tmp_path: Path) -> None:
    _twowiki_fixture(tmp_path)
    _musique_fixture(tmp_path)
    _hotpot_fixture(tmp_path)
    _medical_fixture(tmp_path)
    names = ("2wiki", "musique", "hotpotqa", "medical")
    write_checksums(tmp_path, [f for name in names for f in source_files(name)])
    chunking = {"chunk_words": 30, "overlap_words": 5}
    params = DataParams.model_validate({"demo": {"n_questions": 2}, "medical": chunking})
    for name in ("demo", "2wiki", "musique", "hotpotqa", "medical"):
        corpus, questions = prepare_dataset(name, tmp_path, params)
        assert list(questions.columns) == list(QUESTIONS_COLUMNS) and len(corpus) > 0
    (tmp_path / musique.FILE).write_text("[]", encoding="utf-8")
    with pytest.raises(ChecksumMismatchError, match="musique_qa_100.json"):
        prepare_dataset("musique", tmp_path, params)
    with pytest.raises(ValueError, match="unknown dataset"):
        prepare_dataset("nq", tmp_path, params)


# --- the real benchmark files -----------------------------------------------------------------


def test_real_data_counts() -> None:
    params = DataParams()
    expected = {  # passages, questions, reliable
        "2wiki": (6119, 1000, 962),
        "musique": (1839, 100, 100),
        "hotpotqa": (4858, 500, 500),
        "medical": (1107, 2062, 2062),
    }
    for name, (n_passages, n_questions, n_reliable) in expected.items():
        corpus, questions = prepare_dataset(name, REPO_DATA, params)
        got = (len(corpus), len(questions), int(questions["gold_reliable"].sum()))
        assert got == (n_passages, n_questions, n_reliable), name
    corpus, questions = prepare_dataset("demo", REPO_DATA, params)
    assert len(corpus) <= demo.MAX_PASSAGES and len(questions) == params.demo.n_questions
    assert len(medical.balanced_subset_ids(REPO_DATA)) == 100


def test_demo_length_caps_pick_short_questions_and_distractors(tmp_path: Path) -> None:
    _twowiki_fixture(tmp_path)
    corpus, questions = demo.tables(tmp_path, n_questions=1, max_gold_words=4, max_distractor_words=2)
    assert questions["question_id"].to_list() == ["q3"]  # q1's gold "Alpha Film" has 8 words
    assert "Alpha Film" not in corpus["title"].to_list()  # an 8-word distractor is too long
    with pytest.raises(ValueError, match="asked for 2 questions"):
        demo.tables(tmp_path, n_questions=2, max_gold_words=4)
