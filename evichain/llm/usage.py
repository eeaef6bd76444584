"""The usage record of one LLM step, shared by every method that charges LLM steps to a
question's trace (EviReform, CEE, the graph retrievers)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StepUsage:
    """Outcome of one LLM step: ok / failure kind, the response's tokens, the step's wall
    seconds, and where a method measures them, its thread CPU seconds and whether the reply
    came from the cache."""

    ok: bool = True
    kind: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    cached: bool = False
