"""Bridge-title pool expansion (ours, not the paper's; ``cee.bridge_expansion``, variant ``robust``).

A second hop usually names its bridge entity in a first-hop passage ("… the son of Emperor
Lothair I and Ermengarde of Tours"), and in Wikipedia-style corpora that entity is another
passage's title. After round t of Eq. 1 the pool grows by

    B_t(q) = top-``bridge_max_per_round`` by sim(q, d), ties by corpus order, of
             { d : title(d) occurs in text(d') for a scanned passage d' of round t,
               title(d) ≠ title(d'), d ∉ A_t(q) }

so that A_t(q) = A_{t−1}(q) ∪ ⋃_p Ret(p) ∪ B_t(q). With ``cee.bridge_inherit`` = γ > 0 each
d ∈ B_t(q) also keeps a share of its source's score, s′(d) = max(s(d), γ · s′(src(d)))
(:func:`inherit_scores`), before the coverage-aware selection. Titles are matched by the EviReform
sentence extractor's :class:`~evichain.text.sentences.TitleMatcher` (whole words,
case-insensitive, leftmost-longest; a one-word title only as a capitalised word not followed by
another capitalised word; a title's base without a trailing parenthetical also matches when it
has ≥ 2 words and one owner). Titles shorter than :data:`MIN_TITLE_CHARS` characters are not
matched. Every passage carrying a matched title is a candidate (titles may repeat in a corpus).
The matcher is built once per corpus (:class:`BridgeIndex`), never per question.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

import numpy as np

from evichain.methods.cee.facets import Passage
from evichain.text.sentences import TitleMatcher

MIN_TITLE_CHARS = 4
"""Titles shorter than this (stripped) are never matched (``"US"``, ``"Ra"``, ``"It"``)."""

_WORD = re.compile(r"\w+")


def title_key(title: str) -> tuple[str, ...]:
    """A title's match key: its NFKC-normalised, case-folded word tokens (as the matcher's)."""
    return tuple(_WORD.findall(unicodedata.normalize("NFKC", title).casefold()))


class BridgeIndex:
    """Corpus titles → passage rows, and the title matcher over them (built once)."""

    def __init__(self, passages: Sequence[Passage]) -> None:
        self.passages = passages
        self.rows_by_key: dict[tuple[str, ...], list[int]] = {}
        for row, p in enumerate(passages):
            if len(p.title.strip()) >= MIN_TITLE_CHARS and title_key(p.title):
                self.rows_by_key.setdefault(title_key(p.title), []).append(row)
        self.matcher = TitleMatcher(p.title for p in passages
                                    if len(p.title.strip()) >= MIN_TITLE_CHARS)

    def linked(self, row: int) -> list[int]:
        """Rows whose title occurs in ``passages[row].text`` (in order of first mention, then
        corpus order), ``row``'s own title (and so ``row``) excluded."""
        own = title_key(self.passages[row].title)
        out: list[int] = []
        for title in self.matcher.find(self.passages[row].text):
            key = title_key(title)
            if key == own:
                continue
            out.extend(r for r in self.rows_by_key.get(key, ()) if r != row and r not in out)
        return out

    def expand(self, scanned: Iterable[int], pool: set[int], q: np.ndarray, E: np.ndarray,
               cap: int) -> list[int]:
        """B_t(q) (module docstring): rows linked from ``scanned`` and not in ``pool``, at most
        ``cap``, by sim(q, d) = φ(q)ᵀφ(d) descending, ties by lower row. ``q`` is φ(q) (dim)."""
        return [row for row, _ in self.expand_with_sources(scanned, pool, q, E, cap)]

    def expand_with_sources(self, scanned: Iterable[int], pool: set[int], q: np.ndarray,
                            E: np.ndarray, cap: int) -> list[tuple[int, int]]:
        """:meth:`expand` with each added row's source: (d, src(d)), src(d) = the first
        scanned row (in scan order) whose text names d's title."""
        source: dict[int, int] = {}
        for row in scanned:
            for r in self.linked(int(row)):
                if r not in pool and r not in source:
                    source[r] = int(row)
        if not source:
            return []
        rows = np.asarray(sorted(source), dtype=np.int64)
        sims = np.asarray(E, dtype=np.float64)[rows] @ np.asarray(q, dtype=np.float64)
        order = np.lexsort((rows, -sims))
        return [(int(r), source[int(r)]) for r in rows[order][:cap]]


def inherit_scores(s: np.ndarray, rows: Sequence[int], bridges: Sequence[int],
                   sources: Sequence[int], share: float) -> np.ndarray:
    """Bridge score inheritance (ours, ``cee.bridge_inherit`` = γ, variant ``robust``):
    s′(d) = max(s(d), γ · s′(src(d))) for each bridge passage d of B(q) in the order it was
    added (so a bridge named by an earlier bridge inherits the inherited score), s′ = s
    elsewhere. ``rows``: the pool's corpus rows (ascending), aligned with ``s``; ``bridges`` /
    ``sources``: corpus rows. γ = 0 returns ``s`` unchanged: a second hop that does not
    resemble q keeps a share of the score of the passage that named it."""
    out = np.asarray(s, dtype=np.float64).copy()
    if share <= 0 or len(bridges) == 0:
        return out
    pos = {int(r): i for i, r in enumerate(rows)}
    for d, src in zip(bridges, sources):
        i, j = pos.get(int(d)), pos.get(int(src))
        if i is not None and j is not None:
            out[i] = max(out[i], share * out[j])
    return out
