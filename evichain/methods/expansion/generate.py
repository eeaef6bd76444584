"""Sampled generations shared by HyDE, query2doc and LameR, and what a failure means.

Sampling and the LLM cache: :class:`~evichain.llm.LLMClient` keys its cache on the model,
messages, schema, prompt version and its sampling settings (``client.sampling()``: temperature,
top_p, max_tokens, seed, json_mode). N samples of one prompt therefore need N different keys,
and with a fixed seed a seeded sampler would also return N identical texts. We use **per-sample
seeds**: sample i (0-based) is drawn by a client whose params are ``llm`` with the method's
temperature and ``seed = (llm.seed or 0) + i`` (:func:`sample_params`). The messages stay the
paper's prompt (no sample index is added to the payload), every sample is reproducible, and a
re-run hits the cache for every sample.

A failed call is a :class:`Generation` with ``status="failed"`` and its error kind; the method
continues with the generations it has (``status="partial"``). When every generation of a
question failed the question's status is ``failed`` and ``on_all_failed`` decides
(:func:`outcome_status`): ``question_only`` retrieves with the question alone and flags
``fallback=True``; ``empty`` writes no run rows. Both are counted in the stage summary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evichain.config import LLMParams
from evichain.llm import LLMClient, LLMSuccess
from evichain.llm.types import Prompt, result_tokens


def sample_params(llm: LLMParams, temperature: float, n: int) -> list[LLMParams]:
    """LLM params of samples 0..n−1: the method's temperature, seeds ``(llm.seed or 0) + i``."""
    base = llm.seed if llm.seed is not None else 0
    return [llm.model_copy(update={"temperature": temperature, "seed": base + i}) for i in range(n)]


@dataclass
class Generation:
    """One sampled generation (or its failure)."""

    sample: int
    seed: int | None
    text: str | None
    status: str
    error_kind: str = ""
    error: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0


def generate(clients: Sequence[LLMClient], prompt: Prompt[Any], check: Callable[[Any], None] | None,
             **variables: Any) -> list[Generation]:
    """One call per sample client (sample i = client i); failures are recorded, not raised."""
    out = []
    for i, client in enumerate(clients):
        result = client.call(prompt, check=check, **variables)
        pt, ct = result_tokens(result)
        if isinstance(result, LLMSuccess):
            out.append(Generation(i, client.params.seed, result.value.passage.strip(), "ok",
                                  prompt_tokens=pt, completion_tokens=ct))
        else:
            out.append(Generation(i, client.params.seed, None, "failed", result.kind,
                                  result.reason[:300], pt, ct))
    return out


def texts(generations: Sequence[Generation]) -> list[str]:
    """The texts of the successful generations, in sample order."""
    return [g.text for g in generations if g.status == "ok" and g.text]


def outcome_status(generations: Sequence[Generation], on_all_failed: str) -> tuple[str, bool, bool]:
    """(status, fallback, write_rows): ``ok`` (all generated), ``partial`` (some failed),
    ``failed`` (none; then ``question_only`` → fallback with rows, ``empty`` → no rows)."""
    n_ok = len(texts(generations))
    if n_ok == len(generations) and n_ok > 0:
        return "ok", False, True
    if n_ok > 0:
        return "partial", False, True
    if on_all_failed == "question_only":
        return "failed", True, True
    return "failed", False, False


def generation_trace(generations: Sequence[Generation], on_all_failed: str) -> dict[str, Any]:
    """Trace columns: generated texts, seeds, counts, failure kinds, tokens, status, fallback."""
    status, fallback, _ = outcome_status(generations, on_all_failed)
    failed = [g for g in generations if g.status != "ok"]
    return {"status": status, "fallback": fallback, "generated": texts(generations),
            "seeds": [g.seed for g in generations], "n_requested": len(generations),
            "n_generated": len(texts(generations)), "n_failed": len(failed),
            "error_kinds": [g.error_kind for g in failed], "errors": [g.error for g in failed],
            "prompt_tokens": sum(g.prompt_tokens for g in generations),
            "completion_tokens": sum(g.completion_tokens for g in generations)}


@dataclass
class Outcome:
    """What an expansion method returns for one question: run rows and its trace row."""

    rows: list[tuple[str, int, str, float]]
    trace: dict[str, Any]
