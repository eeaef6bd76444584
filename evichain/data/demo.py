r"""The bundled ``demo`` dataset: a small, real slice of 2WikiMultiHopQA.

Rules (deterministic; no randomness, no model)
- Questions: the first ``n_questions`` 2Wiki questions with ``gold_reliable`` True whose gold
  passages have at most ``max_gold_words`` words each, in release order, exactly as converted
  by :mod:`evichain.data.twowiki` (same ids, gold ids, answers). The length rule keeps LLM
  extraction inside the demo's 15 minutes: one 418-word article costs 2-4 min of extraction
  with the offline model on 2 cores.
- Corpus: the union of their gold passages, plus distractors. First the 2Wiki passages whose
  title occurs in a demo question as a whole word (case-insensitive; the title must not be
  preceded or followed by a letter, digit or underscore); then, round-robin over the questions,
  each question's lexical near-misses: the non-gold passages sharing the most distinct
  content words (lower-cased ``\w\w+`` tokens minus a small stop list) with the question,
  ties by corpus order. Only distractors of at most ``max_distractor_words`` words are used
  (a 500-word article costs ~1 min of LLM extraction on 2 cores). Distractors are added until
  the corpus holds ``max_passages`` passages (the whole demo, LLM steps included, must run in
  15 min), so retrieval on the demo has real competition.
  Gold passages are never dropped: if they alone exceed ``max_passages`` it is an error.
- Corpus rows keep 2Wiki corpus order; passage ids equal the 2Wiki ids.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import polars as pl

from evichain.data import twowiki
from evichain.data.schema import as_pandas

FILES: tuple[str, ...] = twowiki.FILES
MAX_PASSAGES = 45


def tables(
    source_dir: Path, n_questions: int = 15, max_passages: int = MAX_PASSAGES,
    max_distractor_words: int | None = None, max_gold_words: int | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Corpus and questions tables of the demo slice (rules in the module docstring)."""
    corpus, questions = twowiki.tables(source_dir)
    if max_gold_words is not None:
        questions = short_gold(questions, corpus, max_gold_words)
    demo_q = select_questions(questions, n_questions)
    gold = _ordered_union(demo_q["gold_passage_ids"].to_list())
    if len(gold) > max_passages:
        raise ValueError(
            f"demo: the first {n_questions} reliable 2Wiki questions have {len(gold)} gold passages, "
            f"more than the {max_passages}-passage cap; lower data.demo.n_questions"
        )
    pool = corpus if max_distractor_words is None else \
        corpus.filter(pl.Series([n_words(t) <= max_distractor_words for t in corpus["text"]], dtype=pl.Boolean))
    questions_text = demo_q["question"].to_list()
    extra = title_matches(pool, questions_text, exclude=set(gold))
    extra += [p for p in lexical_near_misses(pool, questions_text, set(gold)) if p not in extra]
    keep = [*gold, *extra[: max_passages - len(gold)]]
    return corpus.filter(pl.col("passage_id").is_in(keep)), demo_q


def convert(
    source_dir: Path, n_questions: int = 15, max_passages: int = MAX_PASSAGES,
    max_distractor_words: int | None = None, max_gold_words: int | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`tables` as pandas frames (:func:`evichain.data.schema.as_pandas`); pandas only for
    the callers not yet migrated (``scripts/drills``)."""
    corpus, questions = tables(source_dir, n_questions, max_passages, max_distractor_words,
                               max_gold_words)
    return as_pandas(corpus), as_pandas(questions)


def n_words(text: str) -> int:
    """Words of ``text``: runs of non-whitespace (``str.split()``)."""
    return len(text.split())


def short_gold(questions: pl.DataFrame, corpus: pl.DataFrame, max_gold_words: int) -> pl.DataFrame:
    """The questions whose gold passages all have at most ``max_gold_words`` words."""
    words = {pid: n_words(text) for pid, text in corpus.select("passage_id", "text").iter_rows()}
    short = [all(words[p] <= max_gold_words for p in ids) for ids in questions["gold_passage_ids"].to_list()]
    return questions.filter(pl.Series(short, dtype=pl.Boolean))


def select_questions(questions: pl.DataFrame, n_questions: int) -> pl.DataFrame:
    """The first ``n_questions`` reliable questions, in release order."""
    reliable = questions.filter(pl.col("gold_reliable"))
    if reliable.height < n_questions:
        raise ValueError(
            f"demo: asked for {n_questions} questions, 2Wiki has {reliable.height} reliable ones"
        )
    return reliable.head(n_questions)


def title_matches(corpus: pl.DataFrame, questions: Iterable[str], exclude: set[str]) -> list[str]:
    """Ids of passages whose title occurs whole-word in a question (question, corpus order)."""
    patterns = [
        (pid, re.compile(r"(?<!\w)" + re.escape(title.casefold()) + r"(?!\w)"))
        for pid, title in corpus.select("passage_id", "title").iter_rows()
        if pid not in exclude
    ]
    found: list[str] = []
    for question in questions:
        text = question.casefold()
        found.extend(pid for pid, pat in patterns if pid not in found and pat.search(text))
    return found


_STOP = frozenset(
    "the of and in to was is a an who which what when where did does do for by on at from with as "
    "that this are were be been has have had his her their its or not both same than more film "
    "director born died".split()
)


def _content_words(text: str) -> set[str]:
    """Lower-cased ``\\w\\w+`` tokens of ``text`` minus the stop list."""
    return {t for t in re.findall(r"\w\w+", text.casefold()) if t not in _STOP}


def lexical_near_misses(corpus: pl.DataFrame, questions: Iterable[str], exclude: set[str],
                        per_question: int = 10) -> list[str]:
    """Non-gold passages with most shared content words per question, round-robin over questions."""
    docs = [(pid, _content_words(f"{title} {text}"))
            for pid, title, text in corpus.select("passage_id", "title", "text").iter_rows()
            if pid not in exclude]
    ranked: list[list[str]] = []
    for question in questions:
        words = _content_words(question)
        scored = sorted(((-len(words & toks), i, pid) for i, (pid, toks) in enumerate(docs)))
        ranked.append([pid for neg, _, pid in scored[:per_question] if neg < 0])
    out: list[str] = []
    for rank in range(per_question):
        for lst in ranked:
            if rank < len(lst) and lst[rank] not in out:
                out.append(lst[rank])
    return out


def _ordered_union(lists: Iterable[Iterable[str]]) -> list[str]:
    """Every id of ``lists`` once, in order of first occurrence."""
    seen: dict[str, None] = {}
    for ids in lists:
        for pid in ids:
            seen.setdefault(pid, None)
    return list(seen)
