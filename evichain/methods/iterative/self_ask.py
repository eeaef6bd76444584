"""Self-Ask with a retriever (Press et al., "Measuring and Narrowing the Compositionality Gap",
Findings EMNLP 2023, §3 "Self-ask + search engine"), on the EviReform protocol (dense retrieval).

Per question q, with the list S of (follow-up, intermediate answer) pairs, initially empty:

1. Ask: the model sees (q, S) and either asks the next follow-up question f ("Follow up:") or
   gives the final answer ("So the final answer is:") — :data:`~.prompts.SELF_ASK`, the paper's
   text format mapped to JSON.
2. Final answer → stop (``answered``).
3. Search: retrieve the top-k passages for f; the intermediate answer a ("Intermediate
   answer:") is read from them with the shared QA prompt (Listing 4) — where the paper inserted
   a search engine's answer. Append (f, a) to S.
4. Stop after ``max_follow_ups`` follow-ups (``step_limit``); else go to 1.

Departures: the paper's few-shot demonstrations become a format description (zero-shot, JSON);
retrieval is over the benchmark corpus, not the web; ``question_retrieval`` optionally adds the
question's own top-k passages first (off by default, as in the paper).

Parsing (counted in ``repairs``): ``follow_up_needed`` inconsistent with the fields present is
resolved by the fields (a follow-up text means a follow-up; otherwise a final answer); a reply
with neither, or a follow-up repeating an earlier one, stops the loop (``no_progress``).

Evidence for the reader, most useful first: the passages of the follow-ups taken round-robin
(each follow-up's best passage, then each one's second, …), so every hop keeps its best passage
within the reader's token budget; the question's own passages (if retrieved) count as the first
hop. Run table: order of first retrieval.
"""

from __future__ import annotations

from itertools import zip_longest

from evichain.methods.iterative.common import Episode, Exploration, IterativeBaseline, clean_text
from evichain.methods.iterative.params import SelfAskParams
from evichain.methods.iterative.prompts import SELF_ASK, SelfAskStep, data
from evichain.qa.prompts import READER


def parse_ask(value: SelfAskStep, ep: Episode) -> tuple[str, str | None]:
    """(follow-up or "", final answer or None) of one reply, resolving inconsistencies."""
    follow_up = clean_text(value.follow_up)
    final = clean_text(value.final_answer) or None
    if follow_up and not value.follow_up_needed:
        ep.repair("follow_up_without_flag")
    if value.follow_up_needed and not follow_up:
        ep.repair("flag_without_follow_up")
    if follow_up and final is not None:
        ep.repair("follow_up_and_final_answer")
        final = None
    return follow_up, final


def round_robin(groups: list[list[int]]) -> list[int]:
    """Rows taken rank by rank across groups (1st of each group, then 2nd, …), distinct."""
    merged = [r for tier in zip_longest(*groups) for r in tier if r is not None]
    return list(dict.fromkeys(merged))


class SelfAsk(IterativeBaseline[SelfAskParams]):
    """Self-Ask for one question at a time (thread-safe)."""

    name = "self_ask"

    def explore(self, ep: Episode) -> Exploration:
        """Follow-ups until a final answer or a stop; evidence = the hops' passages taken
        rank by rank (:func:`round_robin`)."""
        hops: list[list[int]] = []
        if self.params.question_retrieval:
            hops.append(ep.retrieve(self.searcher, ep.question, self.params.k))
            ep.add(hops[-1])
        steps: list[dict[str, str]] = []
        while self._step(ep, steps, hops):
            pass
        evidence = [(j, self.passages.texts[j]) for j in round_robin(hops)]
        return Exploration(evidence, {"follow_ups": [s["follow_up"] for s in steps],
                                      "intermediate_answers": [s["intermediate_answer"] for s in steps]})

    def _step(self, ep: Episode, steps: list[dict[str, str]], hops: list[list[int]]) -> bool:
        """Ask, search and answer one follow-up; False when the loop stops."""
        value = ep.ask("ask", SELF_ASK, data=data({"question": ep.question, "steps": steps}))
        if value is None:
            ep.stop("llm_failure")
            return False
        follow_up, final = parse_ask(value, ep)
        if not follow_up:
            if final is None:
                ep.repair("empty_step")
                ep.stop("no_progress")
            else:
                ep.answer = final
                ep.stop("answered")
            return False
        if follow_up.casefold() in {s["follow_up"].casefold() for s in steps}:
            ep.repair("repeated_follow_up")
            ep.stop("no_progress")
            return False
        ep.n_steps += 1
        rows = ep.retrieve(self.searcher, follow_up, self.params.k)
        ep.add(rows)
        hops.append(rows)
        reply = ep.ask("intermediate_answer", READER,
                       payload={"question": follow_up, "evidence": self.passages.items(rows)})
        if reply is None:
            ep.stop("llm_failure")
            return False
        steps.append({"follow_up": follow_up, "intermediate_answer": clean_text(reply.answer)})
        if len(steps) >= self.params.max_follow_ups:
            ep.stop("step_limit")
            return False
        return True
