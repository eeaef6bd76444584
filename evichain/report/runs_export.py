"""Rankings, gold and reader answers as plain files anyone can re-score (issue 63, item 7).

Every ranking a table reports, and every answer the reader gave, is committed under ``reports/``
so that a metric can be recomputed on a clean clone, without the DVC-cached artifacts:

=====================================  ====================================================
file                                   content
=====================================  ====================================================
``runs/<ds>/<method>.trec.gz``         TREC run ``qid Q0 docid rank score tag``
``runs/<ds>/qrels.txt``                TREC qrels ``qid 0 docid 1``: gold passages
``answers/<ds>/<method>.jsonl``        one JSON object per answered question
``answers/<ds>/gold.json``             gold answers of the evaluated questions
=====================================  ====================================================

Conventions (the metrics' own, :mod:`evichain.metrics.retrieval` and :mod:`evichain.metrics.qa`):

* A run's passages are written in the run's order: rows sorted by the ``rank`` column, numbered
  ``rank = 1..n`` per question, ``score = -rank``. Any TREC tool sorts by score, so it reads
  exactly the evaluated order (the method's own scores may tie or, for fused and iterative runs,
  not follow the order; they are not exported). Questions in sorted id order; ``tag`` is the
  method name. A repeated passage or rank within one question is an error, as in the metrics.
* The gold files hold only the *evaluated* questions: those with at least one gold passage
  (qrels) or gold answer (``gold.json``), restricted to ``gold_reliable`` questions when the
  metrics are (``evaluate.twowiki_reliable_only`` on 2Wiki sources; recorded in ``gold.json`` as
  ``question_filter``). A metric is the mean over these questions; one absent from a run or an
  answer file scores 0.
* Bytes are deterministic: gzip with ``mtime = 0``, no file name and the "unknown" OS byte;
  JSON with sorted keys, UTF-8, ``\\n`` line ends. The same inputs always give the same files.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from evichain.io import atomic_path
from evichain.metrics.retrieval import gold_table
from evichain.paths import DatasetPaths

RUN_SUFFIX = ".trec.gz"
ANSWERS_SUFFIX = ".jsonl"
QRELS_NAME = "qrels.txt"
GOLD_ANSWERS_NAME = "gold.json"
ANSWER_FIELDS: tuple[str, ...] = ("question_id", "prediction", "status")
"""Written for every answer."""
OPTIONAL_ANSWER_FIELDS: tuple[str, ...] = ("answers", "context_passage_ids", "error_kind",
                                           "prompt_tokens", "completion_tokens")
"""Written when the reader's table has them: gold answers, the passages the reader was given,
why an answer failed, and the tokens behind the metrics JSON's ``reader_tokens_per_question``."""
RELIABLE_FILTER = "gold_reliable"
ALL_FILTER = "all"
QA_PREFIX = "qa-"
"""Metrics JSON ``qa-<method>.json`` scores the reader's answers of ``<method>``."""


def run_file(reports: Path, dataset: str, method: str) -> Path:
    """``<reports>/runs/<dataset>/<method>.trec.gz``."""
    return reports / "runs" / dataset / f"{method}{RUN_SUFFIX}"


def qrels_file(reports: Path, dataset: str) -> Path:
    """``<reports>/runs/<dataset>/qrels.txt``."""
    return reports / "runs" / dataset / QRELS_NAME


def answers_file(reports: Path, dataset: str, method: str) -> Path:
    """``<reports>/answers/<dataset>/<method>.jsonl``."""
    return reports / "answers" / dataset / f"{method}{ANSWERS_SUFFIX}"


def gold_answers_file(reports: Path, dataset: str) -> Path:
    """``<reports>/answers/<dataset>/gold.json``."""
    return reports / "answers" / dataset / GOLD_ANSWERS_NAME


def question_filter(reliable_only: bool) -> str:
    """The metrics JSON's ``question_filter`` value: ``gold_reliable`` or ``all``."""
    return RELIABLE_FILTER if reliable_only else ALL_FILTER


def evaluated_questions(questions: pl.DataFrame, reliable_only: bool) -> pl.DataFrame:
    """``questions`` restricted to ``gold_reliable`` rows when ``reliable_only`` (the metrics'
    filter, stages/evaluate.py); all rows otherwise."""
    if not reliable_only:
        return questions
    if RELIABLE_FILTER not in questions.columns:
        raise ValueError(f"questions table has no {RELIABLE_FILTER!r} column to filter on")
    return questions.filter(pl.col(RELIABLE_FILTER).fill_null(False))


# --- runs ---------------------------------------------------------------------------------------


def trec_run_text(run: pl.DataFrame, tag: str) -> str:
    """A run as TREC run lines ``qid Q0 docid rank score tag`` (module docstring conventions)."""
    _check_token(tag, "tag")
    df = run.select(pl.col("question_id").cast(pl.String), pl.col("passage_id").cast(pl.String),
                    pl.col("rank").cast(pl.Int64))
    for col in ("passage_id", "rank"):
        repeated = df.filter(pl.struct("question_id", col).is_duplicated())
        if repeated.height:
            raise ValueError(f"run repeats a {col} within question {repeated['question_id'][0]!r}")
    df = df.sort(["question_id", "rank"])
    lines = []
    for qid, pid, position in df.with_columns(
            pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("question_id").alias("position")
    ).select("question_id", "passage_id", "position").iter_rows():
        _check_token(qid, "question_id")
        _check_token(pid, "passage_id")
        lines.append(f"{qid} Q0 {pid} {position} {-position} {tag}\n")
    return "".join(lines)


def write_trec_run(run: pl.DataFrame, path: str | Path, tag: str) -> Path:
    """Write :func:`trec_run_text` gzipped (deterministic bytes), atomically."""
    return _write_bytes(_gzip(trec_run_text(run, tag).encode("utf-8")), path)


def read_trec_run(path: str | Path) -> pl.DataFrame:
    """A run file back as ``question_id, passage_id, rank, score, tag`` in file order.

    Checks the format this module writes: six fields per line, ``Q0``, ranks ``1..n`` in order
    within each question; ``ValueError`` otherwise."""
    rows: list[tuple[str, str, int, float, str]] = []
    done: set[str] = set()
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            fields = line.split()
            if len(fields) != 6 or fields[1] != "Q0":
                raise ValueError(f"{path}:{number}: expected 'qid Q0 docid rank score tag', got {line!r}")
            qid, _, pid, rank, score, tag = fields
            if rows and rows[-1][0] != qid:
                done.add(rows[-1][0])
            if qid in done:
                raise ValueError(f"{path}:{number}: question {qid!r} appears in two separate blocks")
            expected = rows[-1][2] + 1 if rows and rows[-1][0] == qid else 1
            if int(rank) != expected:
                raise ValueError(f"{path}:{number}: rank {rank} of {qid!r}, expected {expected}")
            rows.append((qid, pid, int(rank), float(score), tag))
    schema = {"question_id": pl.String, "passage_id": pl.String, "rank": pl.Int64,
              "score": pl.Float64, "tag": pl.String}
    return pl.DataFrame(rows, schema=schema, orient="row")


# --- gold ---------------------------------------------------------------------------------------


def qrels_text(questions: pl.DataFrame) -> str:
    """TREC qrels ``qid 0 docid 1`` of every (question, gold passage) pair of ``questions``
    (duplicates collapsed, sorted); questions without gold have no line."""
    gold, _ = gold_table(questions)
    lines = []
    for qid, pid in gold.select("question_id", "passage_id").iter_rows():
        _check_token(qid, "question_id")
        _check_token(pid, "passage_id")
        lines.append(f"{qid} 0 {pid} 1\n")
    return "".join(lines)


def write_qrels(questions: pl.DataFrame, path: str | Path) -> Path:
    """Write :func:`qrels_text` of ``questions`` (already filtered) atomically."""
    return _write_bytes(qrels_text(questions).encode("utf-8"), path)


def read_qrels(path: str | Path) -> pl.DataFrame:
    """A qrels file back as ``question_id, passage_id, relevance`` (``ValueError`` on a line
    that is not ``qid iteration docid relevance``)."""
    rows: list[tuple[str, str, int]] = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        fields = line.split()
        if len(fields) != 4:
            raise ValueError(f"{path}:{number}: expected 'qid 0 docid relevance', got {line!r}")
        rows.append((fields[0], fields[2], int(fields[3])))
    schema = {"question_id": pl.String, "passage_id": pl.String, "relevance": pl.Int64}
    return pl.DataFrame(rows, schema=schema, orient="row")


def gold_answers(questions: pl.DataFrame, filter_name: str) -> dict[str, Any]:
    """The ``gold.json`` document: ``question_filter`` and ``answers`` (question id → its gold
    answers, canonical first) for every question of ``questions`` with at least one answer."""
    answers: dict[str, list[str]] = {}
    for qid, golds in questions.select(pl.col("question_id").cast(pl.String), "answers").iter_rows():
        kept = _answer_list(golds)
        if kept:
            answers[qid] = kept
    return {"question_filter": filter_name, "answers": answers}


def write_gold_answers(questions: pl.DataFrame, filter_name: str, path: str | Path) -> Path:
    """Write :func:`gold_answers` as JSON (sorted keys) atomically."""
    return _write_bytes(_json_bytes(gold_answers(questions, filter_name), indent=1), path)


def read_gold_answers(path: str | Path) -> tuple[str, dict[str, list[str]]]:
    """``(question_filter, answers)`` of a ``gold.json`` file."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    return str(doc["question_filter"]), {str(q): [str(a) for a in g] for q, g in doc["answers"].items()}


# --- reader answers -----------------------------------------------------------------------------


def answers_text(answers: pl.DataFrame) -> str:
    """JSON Lines, one object per row of the reader's table sorted by ``question_id``: the
    :data:`ANSWER_FIELDS` and those of :data:`OPTIONAL_ANSWER_FIELDS` the table has."""
    missing = [c for c in ANSWER_FIELDS if c not in answers.columns]
    if missing:
        raise ValueError(f"answers table lacks column(s) {missing}")
    fields = [*ANSWER_FIELDS, *(c for c in OPTIONAL_ANSWER_FIELDS if c in answers.columns)]
    table = answers.select(fields).with_columns(pl.col("question_id").cast(pl.String))
    if table["question_id"].is_duplicated().any():
        raise ValueError("answers table repeats a question_id")
    rows = table.sort("question_id").to_dicts()
    return "".join(_json_bytes(row).decode("utf-8") for row in rows)


def write_answers(answers: pl.DataFrame, path: str | Path) -> Path:
    """Write :func:`answers_text` atomically."""
    return _write_bytes(answers_text(answers).encode("utf-8"), path)


def read_answers(path: str | Path) -> list[dict[str, Any]]:
    """The objects of an answers file, in file order."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line]


# --- helpers ------------------------------------------------------------------------------------


def _answer_list(value: object) -> list[str]:
    """Gold answers of one cell as strings: a list (nulls dropped), a bare string, or none."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (Sequence, pl.Series)):
        return [str(v) for v in value if v is not None]
    raise TypeError(f"answers: expected a list or a string, got {type(value).__name__}")


def _check_token(value: str, what: str) -> None:
    """A TREC field must be one non-empty, whitespace-free token."""
    if not value or len(value.split()) != 1 or value != value.strip():
        raise ValueError(f"{what} {value!r} cannot be a TREC field (empty or has whitespace)")


def _json_bytes(obj: Mapping[str, Any], indent: int | None = None) -> bytes:
    """Sorted-key JSON of ``obj`` plus ``\\n``, UTF-8."""
    return (json.dumps(obj, sort_keys=True, ensure_ascii=False, indent=indent) + "\n").encode("utf-8")


def _gzip(data: bytes) -> bytes:
    """gzip of ``data`` with a fixed header: ``mtime = 0``, no file name, OS byte 255."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as fh:
        fh.write(data)
    return buffer.getvalue()


def _write_bytes(data: bytes, path: str | Path) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`evichain.io.atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


# --- one dataset --------------------------------------------------------------------------------


def reported_methods(metrics_dir: Path) -> tuple[list[str], list[str]]:
    """``(ranked, answered)``: the methods whose run, and those whose reader answers, a metrics
    JSON in ``metrics_dir`` reports (``<m>.json`` / ``qa-<m>.json`` with ``n_questions > 0``);
    other JSON (no questions, judge-scored ``medqa-*``) name nothing to export."""
    ranked, answered = [], []
    for path in sorted(metrics_dir.glob("*.json")):
        stored = json.loads(path.read_text(encoding="utf-8"))
        if not stored.get("n_questions"):
            continue
        if path.stem.startswith(QA_PREFIX) and "EM" in stored:
            answered.append(path.stem[len(QA_PREFIX):])
        elif any(key.startswith("Recall@") for key in stored):
            ranked.append(path.stem)
    return ranked, answered


def export_runs(paths: DatasetPaths, reports: Path, reliable_only: bool) -> dict[str, list[str]]:
    """Write the qrels of the evaluated questions and every reported run found in
    ``artifacts/<ds>/runs``; ``{"exported": [...], "not_here": [...]}`` (methods)."""
    questions = evaluated_questions(pl.read_parquet(paths.questions), reliable_only)
    write_qrels(questions, qrels_file(reports, paths.dataset))
    ranked, _ = reported_methods(reports / "metrics" / paths.dataset)
    return _export_present(ranked, paths.run, lambda m, table: write_trec_run(
        table, run_file(reports, paths.dataset, m), m))


def export_answers(paths: DatasetPaths, reports: Path, reliable_only: bool) -> dict[str, list[str]]:
    """Write ``gold.json`` of the evaluated questions and the answers of every reported reader
    found in ``artifacts/<ds>/qa``; ``{"exported": [...], "not_here": [...]}`` (methods)."""
    questions = evaluated_questions(pl.read_parquet(paths.questions), reliable_only)
    write_gold_answers(questions, question_filter(reliable_only), gold_answers_file(reports, paths.dataset))
    _, answered = reported_methods(reports / "metrics" / paths.dataset)
    return _export_present(answered, paths.qa, lambda m, table: write_answers(
        table, answers_file(reports, paths.dataset, m)))


def _export_present(methods: Sequence[str], source: Callable[[str], Path],
                    write: Callable[[str, pl.DataFrame], object]) -> dict[str, list[str]]:
    """``write(method, table)`` for each method whose ``source(method)`` Parquet exists here;
    ``{"exported": [...], "not_here": [...]}`` (a missing table is listed, never an error)."""
    exported, absent = [], []
    for method in methods:
        if source(method).exists():
            write(method, pl.read_parquet(source(method)))
            exported.append(method)
        else:
            absent.append(method)
    return {"exported": exported, "not_here": absent}
