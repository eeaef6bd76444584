"""Question samples of a full dataset, for runs the LLM budget cannot afford in full.

A sample dataset (``2wiki_s``, ``hotpotqa_s``, ``medical_s``) keeps the source's whole corpus
(so retrieval is exactly as hard as on the full dataset) and takes a fixed, deterministic
subset of its questions, in release order (no randomness):

* ``per_type: false``: the first ``n_questions`` questions after the first ``offset`` (2Wiki:
  gold-reliable ones only, the questions the evaluation counts); ``offset`` keeps a tuning
  sample (``2wiki_tune_s``: reliable questions 101-200) disjoint from a reported one
  (``2wiki_s``: 1-100);
* ``per_type: true``: the first ``n_questions`` questions of each ``type`` (GraphRAG-Bench
  Medical's four question types), types in order of first appearance.

Every method evaluated on a sample sees the same questions, so sample tables are paired.
"""

from __future__ import annotations

import polars as pl


def sample_questions(questions: pl.DataFrame, n_questions: int, per_type: bool,
                     offset: int = 0) -> pl.DataFrame:
    """The sample's questions (rules in the module docstring), in release order.

    ``per_type``: a question is kept when fewer than ``n_questions`` questions of its type come
    before it in the pool (its rank within its type, ``int_range(len).over(type)``, is below
    ``n_questions``); otherwise rows ``offset .. offset + n_questions - 1`` of the pool.
    """
    pool = questions.filter(pl.col("gold_reliable")) if "gold_reliable" in questions.columns else questions
    if per_type:
        picked = pool.filter(pl.int_range(pl.len()).over("type") < n_questions)
    else:
        picked = pool.slice(offset, n_questions)
    if picked.is_empty():
        raise ValueError("sample: no questions selected")
    return picked
