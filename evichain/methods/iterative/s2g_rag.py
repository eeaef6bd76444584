"""S2G-RAG: structured sufficiency and gap judging (Li et al., ACL 2026), with EviReform's
Listings 6 (S2G-Judge) and 7 (sentence-level evidence selector) and dense retrieval.

Per question q, with the sentence-level Evidence Context C (initially empty), gap items G
(initially none) and query ρ_1 = q, for turn t = 1 … ``max_turns``:

1. Retrieve the top-k documents for ρ_t (with ``exclude_seen``, documents retrieved in an
   earlier turn are skipped: the gap query asks for new evidence).
2. Select: number the sentences of the documents not offered before (global ids 1…n) and let
   the selector choose at most K of them given (q, G) (Listing 7); C ← C ∪ selected.
3. On the last turn stop (``step_limit``). Otherwise judge (Listing 6) whether C suffices for
   q: sufficient → stop (``answered``); else G ← the gap items and ρ_{t+1} ← the gap query
   (:func:`gap_query`).

Parsing (counted in ``repairs``): selected ids outside the list, repeated, or beyond K are
dropped; an unknown gap category becomes ``other``; gap items with no text are dropped; gap
items returned with ``sufficient: true`` are ignored; an insufficient judgement without gap items
falls back to the question as the next query. A turn that offers no new sentence stops the loop
(``no_progress``).

CONTEXT of the judge and the reader's evidence are the same thing: C grouped by document, each
document's selected sentences in their original order, documents in the order their first
sentence was selected (turn, then sentence id). Run table: documents by first retrieval.
Sentences: :func:`evichain.text.sentences.split_sentences`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from evichain.text.sentences import split_sentences
from evichain.methods.iterative.common import Episode, Exploration, IterativeBaseline, clean_text
from evichain.methods.iterative.params import S2GRAGParams
from evichain.methods.iterative.prompts import (S2G_JUDGE, GapItem, SufficiencyJudgement, data,
                                                selection_prompt)

CATEGORIES = frozenset({"bridge_entity", "attribute", "relation", "evidence_span", "other"})


@dataclass
class EvidenceContext:
    """Selected sentences: (row, sentence index) in selection order, and each row's sentences."""

    picked: list[tuple[int, int]] = field(default_factory=list)
    offered: set[tuple[int, int]] = field(default_factory=set)

    def documents(self, sentences: dict[int, list[str]]) -> list[tuple[int, str]]:
        """(row, its selected sentences in text order) in order of first selection."""
        rows = list(dict.fromkeys(r for r, _ in self.picked))
        chosen = {r: sorted(i for rr, i in self.picked if rr == r) for r in rows}
        return [(r, " ".join(sentences[r][i] for i in chosen[r])) for r in rows]


def clean_gaps(judgement: SufficiencyJudgement, ep: Episode) -> list[GapItem]:
    """Gap items with a known category and some text (Listing 6 rules), counted repairs."""
    if judgement.sufficient:
        ep.repair("gaps_when_sufficient", len(judgement.gap_items))
        return []
    out: list[GapItem] = []
    for item in judgement.gap_items:
        fields = {k: clean_text(getattr(item, k)) for k in ("target", "slot", "description")}
        if not any(fields.values()):
            ep.repair("empty_gap_item")
            continue
        category = clean_text(item.category).casefold()
        if category not in CATEGORIES:
            ep.repair("unknown_gap_category")
            category = "other"
        out.append(GapItem(category=category, **fields))
    return out


def gap_query(gaps: list[GapItem], mode: str) -> str:
    """The next retrieval query from gap items: ``target_slot`` takes "target slot" of each item
    (its description when both are empty); ``description`` takes descriptions (else "target
    slot"). Case-insensitively distinct parts, joined with "; "."""
    parts: list[str] = []
    for g in gaps:
        target_slot = " ".join(x for x in (g.target, g.slot) if x)
        first, second = (target_slot, g.description) if mode == "target_slot" else (g.description, target_slot)
        text = first or second
        if text and text.casefold() not in {p.casefold() for p in parts}:
            parts.append(text)
    return "; ".join(parts)


def clean_ids(raw: list[int], n: int, k: int, ep: Episode) -> list[int]:
    """Valid (1…n), distinct ids in reply order, at most k; drops counted."""
    valid = [int(i) for i in raw if 1 <= int(i) <= n]
    ep.repair("unknown_sentence_ids", len(raw) - len(valid))
    distinct = list(dict.fromkeys(valid))
    ep.repair("duplicate_sentence_ids", len(valid) - len(distinct))
    ep.repair("sentences_over_k", max(0, len(distinct) - k))
    return distinct[:k]


class S2GRAG(IterativeBaseline[S2GRAGParams]):
    """S2G-RAG for one question at a time (thread-safe; sentence splits cached per call)."""

    name = "s2g_rag"

    def explore(self, ep: Episode) -> Exploration:
        """Turns of select (steps 1–2) and judge until sufficient or ``max_turns``; evidence =
        the selected sentences of each document."""
        ctx = EvidenceContext()
        sentences: dict[int, list[str]] = {}
        gaps: list[GapItem] = []
        query = ep.question
        judged: list[str] = []
        for turn in range(1, self.params.max_turns + 1):
            ep.n_steps = turn
            if not self._select(ep, ctx, sentences, query, gaps, turn):
                break
            if turn == self.params.max_turns:
                ep.stop("step_limit")
                break
            verdict = self._judge(ep, ctx, sentences)
            if verdict is None:
                break
            gaps = verdict
            judged.append(json.dumps([g.model_dump() for g in gaps]))
            query = gap_query(gaps, self.params.gap_query) or self._no_gap(ep)
        evidence = ctx.documents(sentences)
        return Exploration(evidence, {"gap_items": judged, "n_selected_sentences": len(ctx.picked)})

    def _select(self, ep: Episode, ctx: EvidenceContext, sentences: dict[int, list[str]],
                query: str, gaps: list[GapItem], turn: int) -> bool:
        """Steps 1–2 of a turn; False when the loop stops."""
        exclude = set(ep.order) if self.params.exclude_seen and turn > 1 else set()
        rows = ep.retrieve(self.searcher, query, self.params.k, exclude)
        ep.add(rows)
        numbered = []
        for r in rows:
            sentences.setdefault(r, split_sentences(self.passages.texts[r]))
            numbered += [(r, i) for i in range(len(sentences[r])) if (r, i) not in ctx.offered]
        if not numbered:
            ep.stop("no_progress")
            return False
        ctx.offered.update(numbered)
        k = self.params.max_sentences
        items = [{"id": n, "title": self.passages.titles[r], "text": sentences[r][i]}
                 for n, (r, i) in enumerate(numbered, 1)]
        payload = {"ORIGINAL QUESTION": ep.question, "MISSING FACTS": [g.model_dump() for g in gaps],
                   "SENTENCES": items, "K": k}
        value = ep.ask("select", selection_prompt(list(range(1, len(items) + 1)), k),
                       data=data(payload))
        if value is None:
            ep.stop("llm_failure")
            return False
        picked = clean_ids(value.evidence_global_ids, len(items), k, ep)
        ctx.picked += [numbered[n - 1] for n in sorted(picked)]
        return True

    def _judge(self, ep: Episode, ctx: EvidenceContext,
               sentences: dict[int, list[str]]) -> list[GapItem] | None:
        """Step 3: the gap items; None when the loop stops (sufficient, or a failed call)."""
        context = [{"title": self.passages.titles[r], "text": t} for r, t in ctx.documents(sentences)]
        value = ep.ask("judge", S2G_JUDGE, data=data({"QUESTION": ep.question, "CONTEXT": context}))
        if value is None:
            ep.stop("llm_failure")
            return None
        gaps = clean_gaps(value, ep)
        if value.sufficient:
            ep.stop("answered")
            return None
        return gaps

    def _no_gap(self, ep: Episode) -> str:
        """An insufficient verdict without usable gap items: retrieve for the question again."""
        ep.repair("no_gap_items")
        return ep.question
