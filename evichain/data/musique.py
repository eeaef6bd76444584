"""MuSiQue (100 questions of the HippoRAG 2 test subset, with their 20 paragraphs each).

Rules
- Corpus: the union of all questions' paragraphs, in file order of first occurrence,
  deduplicated by (title, paragraph_text) (expect 1,839 passages).
- Questions, in file order: ``answers`` = answer then ``answer_aliases`` (deduplicated);
  ``n_hops`` = len(question_decomposition); ``type`` = the id prefix before ``"__"``
  (``2hop``, ``3hop1``, ``4hop3``, ...: the number of hops and MuSiQue's composition shape).
- Gold: the paragraphs with ``is_supporting``, ordered by the decomposition steps that cite
  them (``paragraph_support_idx``, matched to the paragraph's ``idx``, else its position);
  supporting paragraphs no step cites follow, in paragraph order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from evichain.data.schema import (
    corpus_table,
    passage_id,
    questions_table,
    unique_strings,
)
from evichain.data.sources import check_unicode, expect_type, field, load_json

FILE = "musique/musique_qa_100.json"
FILES: tuple[str, ...] = (FILE,)


def tables(source_dir: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Corpus and questions tables of MuSiQue from ``source_dir`` (the ``data/`` folder)."""
    path = Path(source_dir) / FILE
    records = expect_type(load_json(path), list, str(path))
    pairs: list[tuple[str, str]] = []
    rows: list[dict[str, Any]] = []
    for i, rec in enumerate(records):
        where = f"{path}: record {i}"
        paragraphs = _paragraphs(field(rec, "paragraphs", list, where), where)
        pairs.extend((p["title"], p["text"]) for p in paragraphs)
        rows.append(_question_row(rec, paragraphs, where))
    return corpus_table(pairs), questions_table(rows)


def _paragraphs(items: list[Any], where: str) -> list[dict[str, Any]]:
    out = []
    for j, item in enumerate(items):
        at = f"{where}: paragraphs[{j}]"
        idx = item.get("idx", j) if isinstance(item, dict) else j
        out.append(
            {
                "idx": idx,
                "title": field(item, "title", str, at),
                "text": field(item, "paragraph_text", str, at),
                "supporting": field(item, "is_supporting", bool, at),
            }
        )
    return out


def _question_row(rec: Any, paragraphs: list[dict[str, Any]], where: str) -> dict[str, Any]:
    qid = field(rec, "id", str, where)
    where = f"{where} ({qid})"
    steps = field(rec, "question_decomposition", list, where)
    aliases = field(rec, "answer_aliases", list, where)
    return {
        "question_id": qid,
        "question": field(rec, "question", str, where),
        "answers": unique_strings([field(rec, "answer", str, where), *_aliases(aliases, where)]),
        "gold_passage_ids": gold_ids(paragraphs, steps),
        "type": qid.split("__", 1)[0] if "__" in qid else "musique",
        "n_hops": len(steps),
    }


def _aliases(aliases: list[Any], where: str) -> list[str]:
    """``answer_aliases`` as strings (``str`` of each), each valid Unicode (a lone surrogate
    raises naming the record)."""
    return [check_unicode(str(a), f"{where}: answer_aliases[{k}]") for k, a in enumerate(aliases)]


def gold_ids(paragraphs: list[dict[str, Any]], steps: list[Any]) -> list[str]:
    """Ids of the supporting paragraphs in decomposition order (rules in the module docstring)."""
    supporting = [p for p in paragraphs if p["supporting"]]
    by_idx = {p["idx"]: p for p in supporting}
    cited = [s.get("paragraph_support_idx") for s in steps if isinstance(s, dict)]
    ordered = [by_idx[i] for i in cited if i in by_idx]
    ordered += [p for p in supporting if all(p is not q for q in ordered)]
    return unique_strings(passage_id(p["title"], p["text"]) for p in ordered)
