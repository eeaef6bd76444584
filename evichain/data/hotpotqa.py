"""HotpotQA (500 dev distractor questions, one JSON object per line).

Rules
- Corpus: the union of all questions' ``contexts``, in file order of first occurrence,
  deduplicated by (title, paragraph_text) (expect 4,858 passages).
- Questions, in file order: ``answers`` = every ``answers_objects[].spans`` entry, flattened
  and deduplicated; gold = the contexts with ``is_supporting``, in context order;
  ``n_hops`` = 2 (every HotpotQA question is 2-hop).
- ``type``: the record's ``type`` ("bridge"/"comparison") where the record carries one; this
  release does not, and guessing it from the answer (yes/no) would be wrong for comparison
  questions with entity answers, so it is then "hotpotqa".
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
from evichain.data.sources import check_unicode, field, load_jsonl

FILE = "hotpotqa/dev_subsampled.jsonl"
FILES: tuple[str, ...] = (FILE,)
N_HOPS = 2
DEFAULT_TYPE = "hotpotqa"


def tables(source_dir: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Corpus and questions tables of HotpotQA from ``source_dir`` (the ``data/`` folder)."""
    path = Path(source_dir) / FILE
    pairs: list[tuple[str, str]] = []
    rows: list[dict[str, Any]] = []
    for lineno, rec in enumerate(load_jsonl(path), start=1):
        where = f"{path}: line {lineno}"
        contexts = _contexts(field(rec, "contexts", list, where), where)
        pairs.extend((title, text) for title, text, _ in contexts)
        rows.append(_question_row(rec, contexts, where))
    return corpus_table(pairs), questions_table(rows)


def _contexts(items: list[Any], where: str) -> list[tuple[str, str, bool]]:
    out = []
    for j, item in enumerate(items):
        at = f"{where}: contexts[{j}]"
        out.append(
            (
                field(item, "title", str, at),
                field(item, "paragraph_text", str, at),
                field(item, "is_supporting", bool, at),
            )
        )
    return out


def _answers(objects: list[Any], where: str) -> list[str]:
    spans: list[str] = []
    for j, obj in enumerate(objects):
        at = f"{where}: answers_objects[{j}]"
        spans.extend(check_unicode(str(s), f"{at}: spans[{k}]")
                     for k, s in enumerate(field(obj, "spans", list, at)))
    return unique_strings(spans)


def _question_row(rec: Any, contexts: list[tuple[str, str, bool]], where: str) -> dict[str, Any]:
    qid = field(rec, "question_id", str, where)
    where = f"{where} ({qid})"
    qtype = rec.get("type") if isinstance(rec.get("type"), str) and rec["type"] else DEFAULT_TYPE
    check_unicode(qtype, f"{where}: field 'type'")
    return {
        "question_id": qid,
        "question": field(rec, "question_text", str, where),
        "answers": _answers(field(rec, "answers_objects", list, where), where),
        "gold_passage_ids": unique_strings(passage_id(t, x) for t, x, sup in contexts if sup),
        "type": qtype,
        "n_hops": N_HOPS,
    }
