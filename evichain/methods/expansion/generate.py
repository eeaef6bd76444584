"""Sampled generations shared by HyDE, query2doc and LameR, and what a failure means.

Sampling and the LLM cache: :class:`~evichain.llm.LLMClient` keys its cache on the model,
messages, schema, prompt version and its sampling settings (``client.sampling()``: temperature,
top_p, max_tokens, seed, json_mode). N samples of one prompt therefore need N different keys,
and with a fixed seed a seeded sampler would also return N identical texts. We use **per-sample
seeds**: sample i (0-based) is drawn by a client whose params are ``llm`` with the method's
temperature and ``seed = (llm.seed or 0) + i`` (:func:`sample_params`). The messages stay the
paper's prompt (no sample index is added to the payload), every sample is reproducible, and a
re-run hits the cache for every sample.

Sample order: with ``llm.concurrency == 1`` (one local model server, one slot) the N samples of
one question are sent back to back: :func:`generate` holds a per-model lock across them, so the
questions that the flow runs in parallel threads do not interleave their calls at the server.
The N prompts are identical, so llama.cpp reuses the prompt's KV cache (its prefix match) for
samples 2..N instead of re-reading the whole prompt once per sample (for LameR's ~1,300-token
prompt about 16 s per sample on 2 cores). The calls, their cache keys and their replies are
unchanged; only their order at the server is. With more than one slot nothing is held.

A failed call is a :class:`Generation` with ``status="failed"`` and its error kind; the method
continues with the generations it has (``status="partial"``). When every generation of a
question failed the question's status is ``failed`` and ``on_all_failed`` decides
(:func:`outcome_status`): ``question_only`` retrieves with the question alone and flags
``fallback=True``; ``empty`` writes no run rows. Both are counted in the stage summary.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from evichain.llm import LLMClient, LLMSuccess
from evichain.llm.params import LLMParams
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


_SEQUENCE_LOCKS: dict[str, threading.Lock] = {}
_SEQUENCE_GUARD = threading.Lock()


@contextmanager
def question_sequence(clients: Sequence[LLMClient]) -> Iterator[None]:
    """Hold the model's sequence lock while one question's samples are sent, when the model has
    a single slot (``concurrency == 1``; module docstring); otherwise hold nothing."""
    if not clients or clients[0].params.concurrency != 1:
        yield
        return
    with _SEQUENCE_GUARD:
        lock = _SEQUENCE_LOCKS.setdefault(clients[0].params.model, threading.Lock())
    with lock:
        yield


def generate(clients: Sequence[LLMClient], prompt: Prompt[Any], check: Callable[[Any], None] | None,
             **variables: Any) -> list[Generation]:
    """One call per sample client (sample i = client i), the samples back to back
    (:func:`question_sequence`); failures are recorded, not raised."""
    with question_sequence(clients):
        return _generate(clients, prompt, check, **variables)


def _generate(clients: Sequence[LLMClient], prompt: Prompt[Any], check: Callable[[Any], None] | None,
              **variables: Any) -> list[Generation]:
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
