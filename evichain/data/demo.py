"""The bundled ``demo`` dataset: a small, real slice of 2WikiMultiHopQA.

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

from evichain.data import twowiki

FILES: tuple[str, ...] = twowiki.FILES
MAX_PASSAGES = 45


def convert(
    source_dir: Path, n_questions: int = 15, max_passages: int = MAX_PASSAGES,
    max_distractor_words: int | None = None, max_gold_words: int | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Corpus and questions tables of the demo slice (rules in the module docstring)."""
    corpus, questions = twowiki.convert(source_dir)
    if max_gold_words is not None:
        words = dict(zip(corpus["passage_id"], corpus["text"].str.split().map(len)))
        short = questions["gold_passage_ids"].map(lambda ids: all(words[p] <= max_gold_words for p in ids))
        questions = questions[short]
    demo_q = select_questions(questions, n_questions)
    gold = _ordered_union(demo_q["gold_passage_ids"])
    if len(gold) > max_passages:
        raise ValueError(
            f"demo: the first {n_questions} reliable 2Wiki questions have {len(gold)} gold passages, "
            f"more than the {max_passages}-passage cap; lower data.demo.n_questions"
        )
    pool = corpus if max_distractor_words is None else \
        corpus[corpus["text"].str.split().map(len) <= max_distractor_words]
    extra = title_matches(pool, demo_q["question"], exclude=set(gold))
    extra += [p for p in lexical_near_misses(pool, demo_q["question"], set(gold))
              if p not in extra]
    keep = set(gold) | set(extra[: max_passages - len(gold)])
    demo_corpus = corpus[corpus["passage_id"].isin(keep)].reset_index(drop=True)
    return demo_corpus, demo_q


def select_questions(questions: pd.DataFrame, n_questions: int) -> pd.DataFrame:
    """The first ``n_questions`` reliable questions, in release order."""
    reliable = questions[questions["gold_reliable"]]
    if len(reliable) < n_questions:
        raise ValueError(
            f"demo: asked for {n_questions} questions, 2Wiki has {len(reliable)} reliable ones"
        )
    return reliable.head(n_questions).reset_index(drop=True)


def title_matches(corpus: pd.DataFrame, questions: Iterable[str], exclude: set[str]) -> list[str]:
    """Ids of passages whose title occurs whole-word in a question (question, corpus order)."""
    patterns = [
        (pid, re.compile(r"(?<!\w)" + re.escape(title.casefold()) + r"(?!\w)"))
        for pid, title in zip(corpus["passage_id"], corpus["title"])
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
    return {t for t in re.findall(r"\w\w+", text.casefold()) if t not in _STOP}


def lexical_near_misses(corpus: pd.DataFrame, questions: Iterable[str], exclude: set[str],
                        per_question: int = 10) -> list[str]:
    """Non-gold passages with most shared content words per question, round-robin over questions."""
    docs = [(pid, _content_words(f"{title} {text}"))
            for pid, title, text in zip(corpus["passage_id"], corpus["title"], corpus["text"])
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
    seen: dict[str, None] = {}
    for ids in lists:
        for pid in ids:
            seen.setdefault(pid, None)
    return list(seen)
