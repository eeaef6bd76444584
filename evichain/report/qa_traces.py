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

import pandas as pd

from evichain.io import read_parquet
from evichain.metrics.qa import _golds, normalize, qa_per_question
from evichain.metrics.retrieval import _as_list
from evichain.paths import DatasetPaths
from evichain.report.tables import render_plain_markdown

ABSTAIN = "unknown"


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


def traces(paths: DatasetPaths, method: str) -> pd.DataFrame:
    """Per-question rows: ``question_id``, ``group``, ``EM``, ``F1``, ``abstain``."""
    questions = read_parquet(paths.questions)
    if "gold_reliable" in questions.columns:
        questions = questions[questions["gold_reliable"].fillna(True).astype(bool)]
    answers = read_parquet(paths.qa(method))
    scored = qa_per_question(answers, questions).set_index("question_id")
    corpus = read_parquet(paths.corpus)
    texts = dict(zip(corpus["passage_id"].astype(str), corpus["title"].astype(str) + " "
                     + corpus["text"].astype(str), strict=True))
    by_id = answers.assign(question_id=answers["question_id"].astype(str)).set_index("question_id")
    rows = []
    for q in questions.itertuples():
        qid = str(q.question_id)
        if qid not in scored.index:  # no gold answer: excluded by the metric too
            continue
        rec = by_id.loc[qid] if qid in by_id.index else None
        ctx = [] if rec is None else [str(p) for p in _as_list(rec["context_passage_ids"])]
        group = context_group(ctx, {str(p) for p in _as_list(q.gold_passage_ids)},
                              _golds(q.answers), texts)
        pred = "" if rec is None or not isinstance(rec["prediction"], str) else rec["prediction"]
        rows.append((qid, group, scored.at[qid, "EM"], scored.at[qid, "F1"],
                     normalize(pred) == ABSTAIN))
    return pd.DataFrame(rows, columns=["question_id", "group", "EM", "F1", "abstain"])


def summary(per_q: pd.DataFrame, method: str) -> pd.DataFrame:
    """One row per group (and ``all``): n, EM, F1, abstain %, in points."""
    groups = sorted(per_q["group"].unique())
    parts = [("all", per_q), *((g, per_q[per_q["group"] == g]) for g in groups if len(groups) > 1)]
    return pd.DataFrame([{"method": method, "group": g, "n": len(t),
                          "EM": round(100 * t["EM"].mean(), 2), "F1": round(100 * t["F1"].mean(), 2),
                          "abstain %": round(100 * t["abstain"].mean(), 1)} for g, t in parts])


def report(paths: DatasetPaths, methods: list[str]) -> str:
    """Markdown table of :func:`summary` for each of ``methods`` on ``paths``' dataset."""
    table = pd.concat([summary(traces(paths, m), m) for m in methods], ignore_index=True)
    return render_plain_markdown(table)
