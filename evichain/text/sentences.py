"""Sentence splitting and title matching shared by the index builders and the baselines
(EviReform's sentence extractor, S2G-RAG and IRCoT sentences, CEE's sentence facets and bridge
titles, OpenIE entity lists).

* :func:`split_sentences`: split at . ! ? followed by a capital or digit, not after common
  abbreviations or a single capital initial;
* :class:`TitleMatcher`: corpus titles found in a text as whole words, case-insensitively
  (leftmost-longest match over word tokens; a one-word title must be capitalised and not
  followed by a capitalised word; a title's base without a trailing parenthetical also matches
  when it has >= 2 words and belongs to one title only);
* :func:`dedupe_ci`: first occurrences, compared case-insensitively.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st jr sr prof gen col lt capt sgt mt no vol vs etc inc ltd co corp bros rev hon "
    "gov sen rep fr ft jan feb mar apr jun jul aug sep sept oct nov dec approx ca c u.s u.k "
    "e.g i.e al".split())
_BOUNDARY = re.compile(r"[.!?][\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])")
_WORD = re.compile(r"\w+")


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences at . ! ? followed by a capital or digit.

    No split after common abbreviations (``St.``, ``Dr.``, month abbreviations) or a single
    capital initial (``Greg A. Hill``).
    """
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        before = text[start:m.start() + 1]
        last = before.rstrip(".!?\"'”’)]").split()[-1:] or [""]
        token = last[0].lower().rstrip(".")
        if token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha()):
            continue
        out.append(text[start:m.start() + 1].strip())
        start = m.end()
    out.append(text[start:].strip())
    return [s for s in out if _WORD.search(s)]


def _tokens(text: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


class TitleMatcher:
    """Whole-word, case-insensitive matching of corpus titles in text (leftmost-longest)."""

    def __init__(self, titles: Iterable[str]) -> None:
        self.keys: dict[tuple[str, ...], str] = {}
        bases: dict[tuple[str, ...], set[str]] = {}
        for title in titles:
            key = _tokens(title)
            if key:
                self.keys.setdefault(key, title)
            base = _tokens(re.sub(r"\s*\([^()]*\)\s*$", "", title))
            if len(base) >= 2 and base != key:
                bases.setdefault(base, set()).add(title)
        for base, owners in bases.items():
            if base not in self.keys and len(owners) == 1:
                self.keys[base] = next(iter(owners))
        self.lengths: dict[str, list[int]] = {}
        for key in self.keys:
            self.lengths.setdefault(key[0], []).append(len(key))
        for first in self.lengths:
            self.lengths[first] = sorted(set(self.lengths[first]), reverse=True)

    def find(self, text: str) -> list[str]:
        """Titles mentioned in ``text``, in order of first occurrence, without duplicates.

        A one-word title matches only a capitalised word not followed by another capitalised
        word ("Comedy!" is not found in "a comedy film", "Los" not in "Los Angeles").
        """
        raw = _WORD.findall(unicodedata.normalize("NFKC", text))
        toks = tuple(t.casefold() for t in raw)
        found: list[str] = []
        i = 0
        while i < len(toks):
            n = self._match_length(toks, raw, i)
            if n:
                title = self.keys[toks[i:i + n]]
                if title not in found:
                    found.append(title)
            i += max(1, n)
        return found

    def _match_length(self, toks: tuple[str, ...], raw: list[str], i: int) -> int:
        for n in self.lengths.get(toks[i], ()):
            if i + n <= len(toks) and toks[i:i + n] in self.keys:
                if n > 1 or _proper_word(raw, i):
                    return n
        return 0


def _proper_word(raw: list[str], i: int) -> bool:
    """A capitalised (or numeric) word whose successor is not capitalised."""
    first = raw[i][:1]
    if not (first.isupper() or first.isdigit()):
        return False
    return i + 1 >= len(raw) or not raw[i + 1][:1].isupper()


def dedupe_ci(items: Iterable[str]) -> list[str]:
    """Non-empty stripped strings, first occurrence kept, compared case-insensitively."""
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        s = item.strip()
        if s and s.casefold() not in seen:
            seen.add(s.casefold())
            out.append(s)
    return out
