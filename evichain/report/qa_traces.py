"""Where the shared reader's answers go wrong: retrieval or reading (issue 40 traces;
``evichain qa-traces``).

For each method on a dataset (the shared reader's answers ``artifacts/<ds>/qa/<m>.parquet``, the
questions and the corpus), every scored question falls in one of three groups by what the reader
saw (its ``context_passage_ids``):

* ``all gold read``: every gold passage of the question is in the context (Chain@k of the
  context, k = ``read.context_k``);
* ``answer in context``: not all gold passages, but some gold answer string occurs in the
  context after :func:`evichain.metrics.qa.normalize` (substring of the normalized text);
* ``answer not in context``: neither: no reader could extract it.

Per group: questions, EM, F1 and the share of abstentions (normalized prediction ``unknown``, the
answer Listing 4 asks for when the passages do not support one). Direct inference has no
context: it gets one row. 2Wiki: gold-reliable questions only, as in the report.
"""

from __future__ import annotations

import polars as pl

from evichain.io import read_table
from evichain.metrics.frames import mean
from evichain.metrics.qa import _golds, normalize, qa_frame
from evichain.metrics.retrieval import _as_list
from evichain.paths import DatasetPaths
from evichain.report.tables import render_plain_markdown

ABSTAIN = "unknown"
TRACE_SCHEMA: dict[str, type[pl.DataType]] = {
    "question_id": pl.String, "group": pl.String, "EM": pl.Float64, "F1": pl.Float64,
    "abstain": pl.Boolean}


def context_group(context_ids: list[str], gold_ids: set[str], golds: list[str],
                  texts: dict[str, str]) -> str:
    """The group of one question (module docstring) from the reader's context passage ids."""
    if not context_ids:
        return "no context (direct)"
    if gold_ids and gold_ids <= set(context_ids):
        return "all gold read"
    context = f' {normalize(" ".join(texts.get(pid, "") for pid in context_ids))} '
    if any(g and f" {g} " in context for g in map(normalize, golds)):
        return "answer in context"
    return "answer not in context"


def _passage_texts(corpus: pl.DataFrame) -> dict[str, str]:
    """passage id → ``title text`` of the corpus (a missing title or text read as empty)."""
    text = pl.concat_str(*(pl.col(c).cast(pl.String).fill_null("") for c in ("title", "text")), separator=" ")
    return dict(corpus.select(pl.col("passage_id").cast(pl.String), text).iter_rows())


def traces(paths: DatasetPaths, method: str) -> pl.DataFrame:
    """Per-question rows: ``question_id``, ``group``, ``EM``, ``F1``, ``abstain``."""
    questions = read_table(paths.questions)
    if "gold_reliable" in questions.columns:
        questions = questions.filter(pl.col("gold_reliable").fill_null(True).cast(pl.Boolean))
    answers = read_table(paths.qa(method))
    scored, _ = qa_frame(answers, questions)
    scores = {qid: (em, f1) for qid, em, f1 in scored.select("question_id", "EM", "F1").iter_rows()}
    texts = _passage_texts(read_table(paths.corpus))
    by_id = {str(r["question_id"]): r for r in answers.iter_rows(named=True)}
    rows = []
    for q in questions.iter_rows(named=True):
        qid = str(q["question_id"])
        if qid not in scores:  # no gold answer: excluded by the metric too
            continue
        rec = by_id.get(qid)
        ctx = [] if rec is None else [str(p) for p in _as_list(rec["context_passage_ids"])]
        group = context_group(ctx, {str(p) for p in _as_list(q["gold_passage_ids"])},
                              _golds(q["answers"]), texts)
        pred = "" if rec is None or not isinstance(rec["prediction"], str) else rec["prediction"]
        rows.append((qid, group, *scores[qid], normalize(pred) == ABSTAIN))
    return pl.DataFrame(rows, schema=TRACE_SCHEMA, orient="row")


def summary(per_q: pl.DataFrame, method: str) -> pl.DataFrame:
    """One row per group (and ``all``): n, EM, F1, abstain %, in points."""
    groups = sorted(per_q["group"].unique().to_list())
    parts = [("all", per_q), *((g, per_q.filter(pl.col("group") == g)) for g in groups if len(groups) > 1)]
    return pl.DataFrame([{"method": method, "group": g, "n": t.height,
                          "EM": round(100 * mean(t["EM"]), 2), "F1": round(100 * mean(t["F1"]), 2),
                          "abstain %": round(100 * mean(t["abstain"]), 1)} for g, t in parts])


def report(paths: DatasetPaths, methods: list[str]) -> str:
    """Markdown table of :func:`summary` for each of ``methods`` on ``paths``' dataset."""
    table = pl.concat([summary(traces(paths, m), m) for m in methods])
    return render_plain_markdown(table)
