"""Entity canonicalisation for the proposition–entity incidence A (paper §3.4).

1. Normalise each mention: NFKC, case-fold, strip accents, punctuation → space, drop the articles
   "a", "an", "the", collapse whitespace (:func:`normalize_mention`).
2. Resolve corpus titles first: a mention equal to a title (exactly, then case-insensitively,
   then after normalisation) is that title's entity when exactly one title matches. Every
   corpus title is its own entity node; other mentions group by normalised form.
3. Fuzzy merge (rapidfuzz ``fuzz.ratio`` ≥ ``fuzzy_threshold``) within blocks of equal first
   character, equal digit content and equal distinguishing tokens (roman numerals, single
   letters/initials, ordinals, Jr/Sr/Elder/Younger): so "1950" never merges with "1951",
   "11 November 875" with "11 November 876", "Ramiro I" with "Ramiro II", "Howard Baker Jr"
   with "Howard Baker Sr" or "William Howard" with "William K. Howard"; strings shorter than
   ``fuzzy_min_chars`` merge only when identical. Merges are applied best score first with union–find, and a merge that would put
   two distinct corpus titles in one entity is refused: two titles never merge.
4. The canonical name is the cluster's title if it has one, else its most frequent raw
   mention (ties: smallest string). ``entity_id = "e" + sha256(name)[:16]``.

Outputs (polars): ``entities`` (entity_id, name, aliases, is_title, degree) sorted by entity_id
and ``incidence`` (prop_id, entity_id), one row per distinct membership, in proposition order.
The propositions come as polars, or as pandas from the stage that still reads them with pandas.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
from rapidfuzz import fuzz, process

if TYPE_CHECKING:
    import pandas as pd

ARTICLES = frozenset({"a", "an", "the"})
_PUNCT = re.compile(r"[^\w\s]|_")
_ROMAN = re.compile(r"^(?=[ivxlcdm]+$)m{0,3}(cm|cd|d?c{0,3})(xc|xl|l?x{0,3})(ix|iv|v?i{0,3})$")
_DISTINGUISHING = frozenset(
    "jr sr junior senior elder younger first second third fourth fifth sixth seventh eighth ninth "
    "tenth eleventh twelfth thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth "
    "nineteenth twentieth".split())
ENTITY_COLUMNS = ["entity_id", "name", "aliases", "is_title", "degree"]
INCIDENCE_COLUMNS = ["prop_id", "entity_id"]


def normalize_mention(text: str) -> str:
    """Case, accents, punctuation and articles removed; whitespace collapsed (step 1)."""
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    s = _PUNCT.sub(" ", "".join(ch for ch in folded if not unicodedata.combining(ch)))
    return " ".join(w for w in s.split() if w not in ARTICLES)


@dataclass(frozen=True)
class Node:
    """An entity before fuzzy merging: a corpus title, or a normalised mention key."""

    key: str
    title: str | None


class TitleResolver:
    """Maps a raw mention to its corpus title when exactly one title matches (step 2)."""

    def __init__(self, titles: Iterable[str]) -> None:
        titles = list(dict.fromkeys(titles))
        self.exact = set(titles)
        self.folded = _unique_map((t.strip().casefold(), t) for t in titles)
        self.normed = _unique_map((normalize_mention(t), t) for t in titles)

    def node(self, mention: str) -> Node | None:
        m = mention.strip()
        if m in self.exact:
            return Node(normalize_mention(m), m)
        for table, key in ((self.folded, m.casefold()), (self.normed, normalize_mention(m))):
            title = table.get(key)
            if title:
                return Node(normalize_mention(title), title)
        key = normalize_mention(m)
        return Node(key, None) if key else None


def _unique_map(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """key → value for keys with exactly one distinct value (ambiguous keys map to '')."""
    out: dict[str, str] = {}
    for key, value in pairs:
        if key:
            out[key] = value if out.get(key, value) == value else ""
    return out


class _Clusters:
    """Union–find over nodes that refuses to join two clusters holding different titles."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.parent = list(range(len(nodes)))
        self.title = [n.title for n in nodes]

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, i: int, j: int) -> bool:
        a, b = self.find(i), self.find(j)
        if a == b:
            return False
        if self.title[a] and self.title[b]:
            return False
        a, b = min(a, b), max(a, b)
        self.parent[b] = a
        self.title[a] = self.title[a] or self.title[b]
        return True


def fuzzy_pairs(strings: Sequence[str], threshold: float, min_chars: int) -> list[tuple[float, int, int]]:
    """(score, i, j), i < j, for fuzzy-similar strings within blocks (step 3)."""
    if threshold >= 100:
        return []
    blocks: dict[tuple[str, str], list[int]] = {}
    for i, s in enumerate(strings):
        if len(s) >= min_chars:
            blocks.setdefault(_block_key(s), []).append(i)
    pairs: list[tuple[float, int, int]] = []
    for members in blocks.values():
        if len(members) > 1:
            pairs.extend(_block_pairs(strings, members, threshold))
    return pairs


def _block_key(key: str) -> tuple[str, str, tuple[str, ...]]:
    """First character, digits and distinguishing tokens: only equal keys may fuzzy-merge."""
    marks = tuple(sorted(t for t in key.split()
                         if len(t) == 1 or t in _DISTINGUISHING or _ROMAN.match(t)))
    return key[0], "".join(re.findall(r"\d", key)), marks


def _block_pairs(strings: Sequence[str], members: list[int], threshold: float,
                 chunk: int = 2048) -> list[tuple[float, int, int]]:
    texts = [strings[i] for i in members]
    out = []
    for start in range(0, len(texts), chunk):
        scores = process.cdist(texts[start:start + chunk], texts, scorer=fuzz.ratio,
                               score_cutoff=threshold, dtype=np.uint8, workers=-1)
        rows, cols = np.nonzero(scores)
        for r, c in zip(rows.tolist(), cols.tolist()):
            a, b = members[start + r], members[c]
            if a < b:
                out.append((float(scores[r, c]), a, b))
    return out


def canonicalize(props: pl.DataFrame | pd.DataFrame, titles: Sequence[str], threshold: float,
                 min_chars: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Entities table and proposition–entity incidence from ``props.entities`` (steps 1–4)."""
    resolver = TitleResolver(titles)
    memberships, mentions_of = _resolve_mentions(props, resolver)
    nodes = sorted(mentions_of, key=lambda n: (n.key, n.title or ""))
    index = {n: i for i, n in enumerate(nodes)}
    clusters = _Clusters(nodes)
    for _, i, j in sorted(fuzzy_pairs([n.key for n in nodes], threshold, min_chars),
                          key=lambda p: (-p[0], nodes[p[1]].key, nodes[p[2]].key)):
        clusters.union(i, j)
    names = _cluster_names(nodes, clusters, mentions_of)
    entity_of_node = [_entity_id(names[clusters.find(i)]) for i in range(len(nodes))]
    pairs = list(dict.fromkeys((pid, entity_of_node[index[node]]) for pid, node in memberships))
    incidence = pl.DataFrame(pairs, schema=INCIDENCE_COLUMNS, orient="row", infer_schema_length=None)
    entities = _entity_table(nodes, clusters, names, mentions_of, pairs)
    return entities, incidence


def _resolve_mentions(props: pl.DataFrame | pd.DataFrame, resolver: TitleResolver
                      ) -> tuple[list[tuple[str, Node]], dict[Node, Counter[str]]]:
    """(prop_id, node) per resolvable mention, in proposition then mention order, and the raw
    (stripped) mention counts of each node."""
    memberships: list[tuple[str, Node]] = []
    mentions_of: dict[Node, Counter[str]] = {}
    for pid, ents in zip(props["prop_id"].to_list(), props["entities"].to_list()):
        for raw in list(ents):
            node = resolver.node(str(raw))
            if node is None:
                continue
            memberships.append((pid, node))
            mentions_of.setdefault(node, Counter())[str(raw).strip()] += 1
    return memberships, mentions_of


def _cluster_names(nodes: Sequence[Node], clusters: _Clusters,
                   mentions_of: dict[Node, Counter[str]]) -> dict[int, str]:
    """Cluster root → canonical name: its title, else its most frequent raw mention (ties:
    smallest string)."""
    counts: dict[int, Counter[str]] = {}
    for i, node in enumerate(nodes):
        counts.setdefault(clusters.find(i), Counter()).update(mentions_of[node])
    names = {}
    for root, counter in counts.items():
        title = clusters.title[root]
        names[root] = title if title else min(counter.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    return names


def _entity_id(name: str) -> str:
    """``"e" + sha256(name)[:16]``."""
    return "e" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]


ENTITY_SCHEMA = {"entity_id": pl.String, "name": pl.String, "aliases": pl.List(pl.String),
                 "is_title": pl.Boolean, "degree": pl.Int64}


def _entity_table(nodes: Sequence[Node], clusters: _Clusters, names: dict[int, str],
                  mentions_of: dict[Node, Counter[str]],
                  incidence: Sequence[tuple[str, str]]) -> pl.DataFrame:
    """One row per cluster: id, name, sorted raw aliases, whether it is a title, degree = its
    rows in the (distinct) incidence; sorted by entity_id (ids are distinct)."""
    aliases: dict[int, set[str]] = {}
    for i, node in enumerate(nodes):
        aliases.setdefault(clusters.find(i), set()).update(mentions_of[node])
    degree = Counter(eid for _, eid in incidence)
    rows = sorted(((_entity_id(name), name, sorted(aliases[root]), bool(clusters.title[root]),
                    degree.get(_entity_id(name), 0)) for root, name in names.items()),
                  key=lambda r: r[0])
    return pl.DataFrame(rows, schema=ENTITY_SCHEMA, orient="row")
