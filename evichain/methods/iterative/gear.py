"""GeAR: graph-enhanced agent for retrieval-augmented generation (Shen et al., Findings ACL
2025), with EviReform's Listings 8-10 and the EviReform protocol (dense base retriever).

Per question q, with gist memory M (triples, initially empty) and query ρ_1 = q, for step
t = 1 … ``max_steps``:

1. SyncGE retrieval (GeAR §3): base retrieval of the top-k passages for ρ_t; the LLM reads
   them and writes proximal triples (Listing 8); the triples are linked to the graph and
   expanded by beam search (:class:`~.gear_graph.EntityGraph`), adding the passages it reaches.
2. Gist memory (Listing 9): M ← update(M, the step's passages not shown before, at most
   ``memory_passages``).
3. On the last step stop (``step_limit``). Otherwise judge answerability from M alone
   (Listing 10): answerable → stop (``answered``); else ρ_{t+1} ← the rewritten query.

Final evidence (GeAR's merge of the gist memory with the retrieved passages): the passages that
support the memory triples (per triple, the retrieved passage owning its most similar
proposition), in memory order, then every other retrieved passage by first retrieval. With
``run_order: evidence`` (default) the run table ranks passages in this order.

Departures (also in the README): the graph is the EviReform proposition–entity index, not the
HippoRAG 2 entity–passage graph of the paper's protocol (see :mod:`.gear_graph`); the beam
keeps one path per end passage as its diversity rule; triples link by embedding similarity of
"subject relation object" text.

Parsing (counted in ``repairs``): triples that are not three non-empty strings are dropped;
duplicate memory triples are dropped; an empty or repeated rewritten query stops the loop
(``no_progress``); a step whose passages were all shown before skips the memory update.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from evichain.methods.iterative.common import (Encoder, Episode, Exploration, IterativeBaseline,
                                               Passages, Searcher, clean_text)
from evichain.methods.iterative.gear_graph import EntityGraph
from evichain.methods.iterative.params import GeARParams
from evichain.methods.iterative.prompts import (GEAR_ANSWERABLE, GEAR_MEMORY, GEAR_TRIPLES, data,
                                                triple_prompt)

Triple = tuple[str, str, str]
TRIPLES = triple_prompt(GEAR_TRIPLES, "proximal_triples")
MEMORY = triple_prompt(GEAR_MEMORY, "gist_triples")


@dataclass
class GeARState:
    """One question's agent state: queries issued, gist memory, passages already shown to the
    memory update, expansion results per step, proximal triples read."""

    queries: list[str]
    memory: list[Triple] = field(default_factory=list)
    shown: set[int] = field(default_factory=set)
    expanded: list[list[int]] = field(default_factory=list)
    n_proximal: int = 0


def clean_triples(raw: list[list[str]], ep: Episode, kind: str) -> list[Triple]:
    """Distinct (case-insensitive) triples of three non-empty strings; drops counted."""
    out: dict[tuple[str, ...], Triple] = {}
    for t in raw:
        parts = [clean_text(x) for x in t]
        if len(parts) != 3 or not all(parts):
            ep.repair(f"malformed_{kind}_triple")
            continue
        key = tuple(p.casefold() for p in parts)
        if key in out:
            ep.repair(f"duplicate_{kind}_triple")
            continue
        out[key] = (parts[0], parts[1], parts[2])
    return list(out.values())


def triple_text(t: Triple) -> str:
    """"subject relation object": the text a triple is embedded as."""
    return " ".join(t)


class GeAR(IterativeBaseline[GeARParams]):
    """GeAR for one question at a time (thread-safe)."""

    name = "gear"

    def __init__(self, passages: Passages, searcher: Searcher, graph: EntityGraph,
                 encode: Encoder, params: GeARParams) -> None:
        super().__init__(passages, searcher, params)
        self.graph = graph
        self.encode = encode

    def explore(self, ep: Episode) -> Exploration:
        """Agent iterations until answerable or ``max_steps``; evidence in
        :meth:`_evidence_order`, which is also the run order when ``run_order`` is
        ``evidence``."""
        state = GeARState(queries=[ep.question])
        for step in range(1, self.params.max_steps + 1):
            ep.n_steps = step
            if not self._step(ep, state, final=step == self.params.max_steps):
                break
        ranking = self._evidence_order(ep, state.memory)
        evidence = [(j, self.passages.texts[j]) for j in ranking]
        run = ranking if self.params.run_order == "evidence" else None
        extras = {"memory": [" | ".join(t) for t in state.memory], "n_proximal_triples": state.n_proximal,
                  "expanded_ids": [[self.passages.ids[r] for r in rows] for rows in state.expanded]}
        return Exploration(evidence, extras, ranking=run)

    def _step(self, ep: Episode, state: GeARState, final: bool) -> bool:
        """One agent iteration; False when the loop stops."""
        query = state.queries[-1]
        rows = self._sync_ge(ep, state, query)
        if rows is None:
            return False
        new = [r for r in rows if r not in state.shown][:self.params.memory_passages]
        if new:
            state.shown.update(new)
            payload = {"question": ep.question, "memory": [list(t) for t in state.memory],
                       "passages": self.passages.items(new)}
            value = ep.ask("memory", MEMORY, data=data(payload))
            if value is None:
                ep.stop("llm_failure")
                return False
            state.memory = clean_triples(value.gist_triples, ep, "memory")
        else:
            ep.repair("nothing_new_for_memory")
        if final:
            ep.stop("step_limit")
            return False
        return self._next_query(ep, state)

    def _sync_ge(self, ep: Episode, state: GeARState, query: str) -> list[int] | None:
        """Base retrieval, proximal triples (Listing 8), linking and graph expansion; the
        step's passages (base first, then expansion), or None on a failed call."""
        base = ep.retrieve(self.searcher, query, self.params.k)
        ep.add(base)
        payload = {"question": ep.question, "passages": self.passages.items(base)}
        value = ep.ask("proximal_triples", TRIPLES, data=data(payload))
        if value is None:
            ep.stop("llm_failure")
            return None
        triples = clean_triples(value.proximal_triples, ep, "proximal")
        state.n_proximal += len(triples)
        expanded: list[int] = []
        if triples:
            vectors = self.encode([triple_text(t) for t in triples] + [query])
            seeds = self.graph.link(vectors[:-1], self.params.link_k)
            u = self.graph.scores(vectors[-1])
            reached = self.graph.expand(seeds, u, self.params.beam_size, self.params.hops, exclude=base)
            expanded = [r for r, _ in reached]
        else:
            ep.repair("no_proximal_triples")
        ep.add(expanded)
        state.expanded.append(expanded)
        return base + expanded

    def _next_query(self, ep: Episode, state: GeARState) -> bool:
        """Listing 10: stop when answerable, else the rewritten query (False to stop)."""
        payload = {"question": ep.question, "memory": [list(t) for t in state.memory]}
        value = ep.ask("answerability", GEAR_ANSWERABLE, data=data(payload))
        if value is None:
            ep.stop("llm_failure")
            return False
        if value.answerable:
            ep.stop("answered")
            return False
        query = clean_text(value.next_query)
        if not query or query.casefold() in {q.casefold() for q in state.queries}:
            ep.repair("empty_query" if not query else "repeated_query")
            ep.stop("no_progress")
            return False
        state.queries.append(query)
        return True

    def _evidence_order(self, ep: Episode, memory: list[Triple]) -> list[int]:
        """Memory-supporting passages first (memory order), then the rest by first retrieval."""
        if not memory or not ep.order:
            return list(ep.order)
        vectors = np.asarray(self.encode([triple_text(t) for t in memory]))
        first = self.graph.supporting_passages(vectors, ep.order)
        return list(dict.fromkeys(first + ep.order))
