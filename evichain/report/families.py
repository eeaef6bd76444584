"""Method families of the report: which family a method belongs to, its place in tables and its
line style in figures.

Families (in display order): first-stage retrievers (BM25, dense), rerankers, query expansion,
graph retrievers, the two seed methods EviReform and CEE (paper-faithful variants), the variants
of ours (``report.ours``), and the iterative methods. Every figure draws a family in one colour
(Okabe-Ito palette, readable in greyscale and by colour-blind readers) and tells the methods of
a family apart by line style and marker; a method keeps its style on every dataset because its
position comes from :data:`KNOWN`, not from which methods happen to be present.

Iterative methods (:data:`ITERATIVE`) return evidence sets. IRCoT, Self-Ask and S2G-RAG
(:data:`UNRANKED`) expose no single passage ranking: EviReform reports no recall for them (§C.1),
the figures leave them out of every ranking plot and the tables list them apart. GeAR
(:data:`RANKED_ITERATIVE`) is scored on its final merged evidence list, as EviReform's Table A.1
scores it (GeAR is the best metric-wise R@5/R@10 comparator on 2Wiki there), so it is a ranking
method of the iterative family. Baselines (:func:`is_baseline`) are the methods of
:data:`BASELINE_FAMILIES`: neither a seed method (EviReform, CEE) nor a variant of ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from evichain.methods.catalogue import METHOD_FAMILIES


def _of(*families: str) -> tuple[str, ...]:
    """The catalogue's methods of ``families``, in catalogue order."""
    return tuple(m for m, f in METHOD_FAMILIES.items() if f in families)


ITERATIVE: frozenset[str] = frozenset(_of("iterative", "iterative_graph"))
"""The iterative methods (the catalogue's ``iterative`` families): they return evidence sets."""

RANKED_ITERATIVE: frozenset[str] = frozenset({"gear"})
"""Iterative methods whose run is a passage ranking the papers score: GeAR's final evidence
(passages supporting its gist memory first, then the rest by first retrieval; EviReform Table A.1
lists GeAR's R@5 and R@10 as the 2Wiki comparator)."""

UNRANKED: frozenset[str] = ITERATIVE - RANKED_ITERATIVE
"""Iterative methods without a comparable passage ranking (EviReform §C.1: IRCoT and S2G-RAG;
Self-Ask likewise): recall N/A, left out of every ranking figure."""

OURS: tuple[str, ...] = ("evireform-robust", "evireform-hybrid", "cee-robust", "evireform-fused",
                         "seeds-fused")
"""Default variants of ours (params ``report.ours``)."""

FAMILIES: tuple[str, ...] = ("first-stage", "rerank", "expansion", "graph", "EviReform", "CEE",
                             "ours", "iterative", "other")

LABEL: dict[str, str] = {
    "first-stage": "lexical / dense", "rerank": "rerankers", "expansion": "query expansion",
    "graph": "graph retrievers", "EviReform": "EviReform (paper variants)",
    "CEE": "CEE (paper variants)", "ours": "variants of ours", "iterative": "iterative / agentic",
    "other": "other"}

COLOUR: dict[str, str] = {  # Okabe-Ito
    "first-stage": "#000000", "rerank": "#E69F00", "expansion": "#56B4E9", "graph": "#009E73",
    "EviReform": "#0072B2", "CEE": "#D55E00", "ours": "#CC79A7", "iterative": "#999999",
    "other": "#7F7F7F"}

KNOWN: dict[str, tuple[str, ...]] = {
    "first-stage": _of("first_stage"),
    "rerank": tuple(f"rerank-{m}" for m in _of("rerank")),
    "expansion": _of("expansion"),
    "graph": _of("graph"),
    "EviReform": ("evireform-base", "evireform-prop_only", "evireform-reform_only", "evireform-full",
                  "evireform-residual_only", "evireform-repeat_question", "evireform-reorder",
                  "evireform-rounds3", "evireform-base_top", "evireform-prop_only_top"),
    "CEE": ("cee-full", "cee-no_coverage", "cee-no_contrastive", "cee-no_sequential"),
    "ours": OURS,
    "iterative": _of("iterative", "iterative_graph"),
}

LINESTYLES: tuple[object, ...] = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)))
MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X", "*")


def family(method: str, ours: Iterable[str] = OURS) -> str:
    """The family of ``method`` (a metrics-file name such as ``evireform-full``)."""
    name = method.lower()
    if name in {o.lower() for o in ours}:
        return "ours"
    if name in ITERATIVE:
        return "iterative"
    if name in ("bm25", "dense"):
        return "first-stage"
    if name.startswith("rerank-"):
        return "rerank"
    if name in KNOWN["expansion"]:
        return "expansion"
    if name in KNOWN["graph"]:
        return "graph"
    if name.startswith("evireform-"):
        return "EviReform"
    if name.startswith("cee-"):
        return "CEE"
    return "other"


def position(method: str, ours: Iterable[str] = OURS) -> int:
    """The method's index within its family: its place in :data:`KNOWN` (``ours``: its place in
    ``ours``), unknown methods after the known ones."""
    fam = family(method, ours)
    known = tuple(o.lower() for o in ours) if fam == "ours" else KNOWN.get(fam, ())
    name = method.lower()
    return known.index(name) if name in known else len(known)


def ordered(methods: Iterable[str], ours: Iterable[str] = OURS) -> list[str]:
    """``methods`` by family (display order), then by :func:`position`, then by name."""
    ours = tuple(ours)
    return sorted(dict.fromkeys(methods),
                  key=lambda m: (FAMILIES.index(family(m, ours)), position(m, ours), m))


def style(method: str, ours: Iterable[str] = OURS) -> dict[str, object]:
    """matplotlib keyword arguments of ``method``'s line: family colour, its own line style and
    marker (the same on every dataset)."""
    ours = tuple(ours)
    i = position(method, ours)
    return {"color": COLOUR[family(method, ours)], "linestyle": LINESTYLES[i % len(LINESTYLES)],
            "marker": MARKERS[i % len(MARKERS)]}


BASELINE_FAMILIES: tuple[str, ...] = ("first-stage", "rerank", "expansion", "graph", "iterative")
"""Families of the baselines: every family but the seed methods (EviReform, CEE), the variants
of ours and unknown (``other``) methods."""


def ranking_methods(methods: Sequence[str]) -> list[str]:
    """``methods`` without those of :data:`UNRANKED` (evidence sets without a passage ranking)."""
    return [m for m in methods if m.lower() not in UNRANKED]


def is_baseline(method: str, ours: Iterable[str] = OURS) -> bool:
    """``method`` belongs to a family of :data:`BASELINE_FAMILIES` (not EviReform, CEE or ours)."""
    return family(method, ours) in BASELINE_FAMILIES
