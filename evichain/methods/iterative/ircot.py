"""IRCoT: interleaving retrieval with chain-of-thought (Trivedi et al., ACL 2023), with the
EviReform protocol (§4.1: dense retrieval; Appendix C.10 Listing 5: one JSON reasoning step).

Per question q (IRCoT §3):

1. Retrieve: P ← top-K(q).
2. Reason: the model writes one new CoT sentence s_t over (q, P, s_1 … s_{t−1}) (Listing 5;
   ``final_round`` is true on step ``max_steps``).
3. Stop if s_t gives the answer ("So the answer is:" in the sentence, or a non-null
   ``answer`` field) — stop reason ``answered`` — or if t = ``max_steps`` (``step_limit``).
4. Otherwise retrieve top-K(s_t) and add the new paragraphs to P while |P| < ``max_paragraphs``
   (IRCoT's cap of 15); go to 2.

Parsing (counted in the trace's ``repairs``): a step of several sentences without the answer
phrase keeps its first sentence (IRCoT uses one generated sentence per step); an answer stated
only in the sentence is taken from it; an empty or repeated sentence adds nothing to the
reasoning — if its retrieval adds no paragraph either, the state is unchanged and the loop stops
(``no_progress``). The final round without an answer ends with ``step_limit``.

Evidence for the reader: the collected paragraphs P in the order they were collected (the
question's paragraphs first), i.e. what IRCoT's own reader sees. Run table: the same order.
"""

from __future__ import annotations

import re

from evichain.text.sentences import split_sentences
from evichain.methods.iterative.common import Episode, Exploration, IterativeBaseline, clean_text
from evichain.methods.iterative.params import IRCoTParams
from evichain.methods.iterative.prompts import IRCOT, IRCoTStep, data

ANSWER_PHRASE = re.compile(r"so the answer is\s*:?\s*(.*)$", re.IGNORECASE | re.DOTALL)


def parse_step(value: IRCoTStep, ep: Episode) -> tuple[str, str | None]:
    """(sentence, answer or None) of a Listing 5 reply, repairing what can be repaired."""
    sentence = clean_text(value.reasoning_step)
    answer = clean_text(value.answer) or None
    in_sentence = ANSWER_PHRASE.search(sentence)
    if answer is None and in_sentence:
        answer = clean_text(in_sentence.group(1)).rstrip(".").strip() or None
        ep.repair("answer_from_sentence", int(answer is not None))
    if answer is None:
        parts = split_sentences(sentence)
        if len(parts) > 1:
            ep.repair("extra_sentences_dropped")
            sentence = parts[0]
    return sentence, answer


class IRCoT(IterativeBaseline[IRCoTParams]):
    """IRCoT for one question at a time (no mutable shared state: thread-safe)."""

    name = "ircot"

    def explore(self, ep: Episode) -> Exploration:
        """Steps 1–4 of the module docstring; evidence = P in collection order."""
        collected: list[int] = []
        self._collect(ep, collected, ep.retrieve(self.searcher, ep.question, self.params.k))
        reasoning: list[str] = []
        for step in range(1, self.params.max_steps + 1):
            ep.n_steps = step
            if not self._step(ep, collected, reasoning, final=step == self.params.max_steps):
                break
        evidence = [(j, self.passages.texts[j]) for j in collected]
        return Exploration(evidence, {"reasoning": reasoning})

    def _step(self, ep: Episode, collected: list[int], reasoning: list[str], final: bool) -> bool:
        """One reasoning step and its retrieval; False when the loop stops."""
        payload = {"question": ep.question, "paragraphs": self.passages.items(collected),
                   "reasoning_so_far": " ".join(reasoning), "final_round": final}
        value = ep.ask("reason", IRCOT, data=data(payload))
        if value is None:
            ep.stop("llm_failure")
            return False
        sentence, answer = parse_step(value, ep)
        fresh = bool(sentence) and sentence.casefold() not in {r.casefold() for r in reasoning}
        if sentence and not fresh:
            ep.repair("repeated_sentence")
        elif not sentence:
            ep.repair("empty_sentence")
        if fresh:
            reasoning.append(sentence)
        if answer is not None:
            ep.answer = answer
            ep.stop("answered")
            return False
        if final:
            ep.repair("final_round_without_answer")
            ep.stop("step_limit")
            return False
        added = self._collect(ep, collected, ep.retrieve(self.searcher, sentence, self.params.k)) if sentence else []
        if not fresh and not added:
            ep.stop("no_progress")
            return False
        return True

    def _collect(self, ep: Episode, collected: list[int], rows: list[int]) -> list[int]:
        """Add rows not yet collected while fewer than ``max_paragraphs`` are held."""
        room = self.params.max_paragraphs - len(collected)
        new = [r for r in dict.fromkeys(rows) if r not in set(collected)][:max(0, room)]
        collected += new
        ep.add(new)
        return new
