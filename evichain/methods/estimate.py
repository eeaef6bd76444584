"""How many LLM calls a method will make on a corpus, and roughly how long they take here.

``evichain run`` prints this before any LLM call (:func:`estimate_calls`, :func:`call_time`),
so that a user learns that, say, PropRAG on a 1,890-passage corpus first has the local 1.5B
model extract every passage (hours on 2 cores) before it starts, not after.

Calls are **model requests before retries and repair turns** (each request may add up to
``llm.max_retries`` retries and one repair turn):

* index calls, per index table the method reads under the params (:meth:`Method.tables`):
  LLM proposition extraction (``evireform.index.extractor: llm``): 1 per passage, minus the
  passages whose answer is already in the LLM cache (counted by cache key, as the client keys
  it); HippoRAG's LLM OpenIE (``graph.openie: llm``): 2 per passage (NER, then triples); CEE's
  LLM facets (``cee.facets.source: llm``): ``min(max_pairs_per_passage, passages − 1)`` per
  target passage, every passage under ``facet_scope: all``, at most ``questions ×
  facet_scope_n`` of them under ``reachable``. Neither of the last two is checked against the
  cache (their keys need the NER answers or the corpus embeddings);
* per-question calls, an upper bound from the method's params (:func:`question_calls`, one
  small rule per family), times the number of questions.

Time = calls × seconds per call / ``llm.concurrency`` (:func:`call_time`), with the seconds per
call set by the user or the documented figure of the backend (:data:`SECONDS_PER_CALL`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evichain.methods.base import PROPOSITION_TABLES, Method

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl

    from evichain.config import Params
    from evichain.llm.params import LLMParams

SECONDS_PER_CALL: dict[str, tuple[float, str]] = {
    "local/qwen2.5-coder-1.5b-instruct-q4_k_m": (
        9.0, "the documented figure of the local 1.5B model on 2 cores: 8.7 s for one passage "
             "extraction (benchmarks/bench_local_llm.results.md), 6-7 s per IRCoT step "
             "(docs/reference.md); long prompts such as EviReform's selection take 1-3 min"),
    "local/qwen2.5-coder-0.5b-instruct-q4_k_m": (
        7.0, "the documented figure of the local 0.5B model on 2 cores: 6.6 s for one passage "
             "extraction (benchmarks/bench_local_llm.results.md)"),
}
"""Documented seconds per call of the bundled local models (``llm.model``), with the source.
The ``scripted/`` test provider answers at once (0 s); any other backend has no figure here:
the user gives one (``evichain run --seconds-per-call``)."""


@dataclass(frozen=True)
class IndexCalls:
    """The LLM calls of building one index table group: ``calls`` before the cache, ``cached``
    of them already answered in the LLM cache (``None``: not counted), and the rule."""

    label: str
    calls: int
    cached: int | None
    rule: str

    @property
    def to_make(self) -> int:
        """Calls still to make: ``calls − cached`` (all of them when the cache was not counted)."""
        return self.calls - (self.cached or 0)


@dataclass(frozen=True)
class CallEstimate:
    """Index calls, the per-question upper bound (``None``: unknown, a plug-in method), the
    number of questions and the per-question rule."""

    index: tuple[IndexCalls, ...]
    per_question: int | None
    questions: int
    question_rule: str

    @property
    def index_calls(self) -> int:
        """Index calls still to make (cached answers excluded where counted)."""
        return sum(i.to_make for i in self.index)

    @property
    def question_calls(self) -> int | None:
        """Upper bound of the per-question calls of the run: per question × questions."""
        return None if self.per_question is None else self.per_question * self.questions

    @property
    def total(self) -> int | None:
        """Index calls + per-question calls (``None`` when the per-question bound is unknown)."""
        q = self.question_calls
        return None if q is None else self.index_calls + q


@dataclass(frozen=True)
class CallTime:
    """Seconds per call (``None``: no figure for the backend) and where the figure comes from."""

    seconds: float | None
    source: str


# --------------------------------------------------------------------------- index calls
def _sampling(llm: LLMParams) -> dict[str, Any]:
    """The sampling settings the client keys its cache on (``LLMClient.sampling``)."""
    return {"temperature": llm.temperature, "top_p": llm.top_p, "max_tokens": llm.max_tokens,
            "seed": llm.seed, "json_mode": llm.json_mode}


def cached_extractions(texts: list[str], llm: LLMParams, max_tokens: int) -> int:
    """How many of ``texts`` already have a proposition-extraction answer in the LLM cache: the
    key of Listing 11 for each passage, as the extraction client computes it (``llm`` with
    ``max_tokens`` = ``evireform.index.max_tokens``)."""
    from evichain.llm.cache import LLMCache, cache_key
    from evichain.methods.evireform.prompts import EXTRACT, paragraph_literal

    sampling = _sampling(llm.model_copy(update={"max_tokens": max_tokens}))
    schema = EXTRACT.json_schema()
    cache = LLMCache()
    keys = (cache_key(model=llm.model, messages=EXTRACT.messages(paragraph=paragraph_literal(t)),
                      sampling=sampling, schema=schema, prompt=EXTRACT.key) for t in texts)
    return sum(cache.get(key) is not None for key in keys)


def proposition_calls(corpus: pl.DataFrame | pd.DataFrame, params: Params) -> IndexCalls:
    """LLM proposition extraction: 1 call per passage (cached answers counted), none with the
    sentence extractor."""
    index = params.evireform.index
    if index.extractor != "llm":
        return IndexCalls("propositions", 0, None, "sentence extractor, no LLM")
    texts = [str(t) for t in corpus["text"].to_list()]
    cached = cached_extractions(texts, params.llm, index.max_tokens)
    return IndexCalls("propositions", len(texts), cached,
                      f"1 per passage × {len(texts):,} passages (evireform.index.extractor: llm)")


def triple_calls(corpus: pl.DataFrame | pd.DataFrame, params: Params) -> IndexCalls:
    """HippoRAG's LLM OpenIE: 2 calls per passage (NER, then triples), none otherwise."""
    if params.graph.openie != "llm":
        return IndexCalls("triples", 0, None, "triples from the propositions, no LLM")
    n = len(corpus)
    return IndexCalls("triples", 2 * n, None, f"2 per passage × {n:,} passages (graph.openie: llm)")


def facet_calls(corpus: pl.DataFrame | pd.DataFrame, questions: int, params: Params, variant: str) -> IndexCalls:
    """CEE's LLM facets: pairs per target × targets (module docstring), none for sentence facets."""
    from evichain.methods.cee.params import variant_params

    facets = variant_params(params.cee, variant).facets
    if facets.source != "llm":
        return IndexCalls("facets", 0, None, "sentence facets, no LLM")
    n = len(corpus)
    pairs = min(facets.max_pairs_per_passage, max(0, n - 1))
    if facets.facet_scope == "all":
        targets, scope = n, "every passage"
    else:
        targets = min(n, questions * facets.facet_scope_n)
        scope = f"≤ {questions} questions × facet_scope_n {facets.facet_scope_n} target passages"
    return IndexCalls("facets", pairs * targets, None,
                      f"{pairs} pairs per target × {targets:,} targets ({scope})")


def index_calls(method: Method, variant: str, params: Params, corpus: pl.DataFrame | pd.DataFrame,
                questions: int) -> tuple[IndexCalls, ...]:
    """The LLM calls of every index table group ``method`` (``variant``) reads under ``params``
    (the tables :func:`flows.user.index_tables` builds); first-stage runs make none."""
    needed = set(method.tables(params, variant))
    out: list[IndexCalls] = []
    if needed & set(PROPOSITION_TABLES):
        out.append(proposition_calls(corpus, params))
    if "triples" in needed:
        out.append(triple_calls(corpus, params))
    if "facets" in needed:
        out.append(facet_calls(corpus, questions, params, variant))
    return tuple(out)


# --------------------------------------------------------------------------- per question
def _expansion(name: str, params: Params, variant: str) -> tuple[int, str]:
    e = params.expansion
    if name == "hyde":
        return e.hyde.n_samples, f"expansion.hyde.n_samples {e.hyde.n_samples}"
    if name == "lamer":
        return e.lamer.n_answers, f"expansion.lamer.n_answers {e.lamer.n_answers}"
    return 1, "one pseudo-document"


def _iterative(name: str, params: Params, variant: str) -> tuple[int, str]:
    it = params.iterative
    if name == "ircot":
        return it.ircot.max_steps, f"one per step, iterative.ircot.max_steps {it.ircot.max_steps}"
    if name == "self_ask":
        n = it.self_ask.max_follow_ups
        return 2 * n, f"2 × iterative.self_ask.max_follow_ups {n} (follow-up + answer)"
    if name == "s2g_rag":
        n = it.s2g_rag.max_turns
        return 2 * n - 1, f"2 × iterative.s2g_rag.max_turns {n} − 1 (select, judge but the last)"
    n = it.gear.max_steps
    return 3 * n - 1, f"3 × iterative.gear.max_steps {n} − 1 (triples, memory, answerability)"


def _graph(name: str, params: Params, variant: str) -> tuple[int, str]:
    g = params.graph
    filter_calls = int(g.hipporag2.recognition_memory)
    if name == "proprag":
        return 0, "none (beam search and PPR)"
    if name == "hipporag2":
        return filter_calls, "graph.hipporag2.recognition_memory filter"
    c = g.catrag
    edge = c.max_scored_seeds * math.ceil(c.max_scored_edges / c.score_batch) if c.edge_weighting else 0
    return (filter_calls + int(c.symbolic_anchoring) + edge,
            f"filter {filter_calls} + query NER {int(c.symbolic_anchoring)} + edge scoring {edge} "
            f"(graph.catrag: max_scored_seeds × ⌈max_scored_edges / score_batch⌉; halved batches "
            f"of an overflowing prompt not counted)")


def _evireform(name: str, params: Params, variant: str) -> tuple[int, str]:
    from evichain.methods.evireform.variants import variant_params

    p = variant_params(params.evireform, variant)
    parts = {"selection": int(p.selection == "llm"), "judge": int(p.reorder),
             "reformulation": p.rounds if p.reformulation else 0}
    return sum(parts.values()), " + ".join(f"{k} {v}" for k, v in parts.items())


def _cee(name: str, params: Params, variant: str) -> tuple[int, str]:
    from evichain.methods.cee.params import variant_params

    t = variant_params(params.cee, variant).effective_rounds
    return 2 * t - 1, f"2 × rounds {t} − 1 (first probes; summary + next probes per later round)"


def _listwise(name: str, params: Params, variant: str) -> tuple[int, str]:
    return (1, "one listwise call over the pool") if name == "listwise" else (0, "no LLM")


_FAMILY_RULES: dict[str, Callable[[str, Params, str], tuple[int, str]]] = {
    "expansion": _expansion, "iterative": _iterative, "iterative_graph": _iterative,
    "graph": _graph, "evireform": _evireform, "cee": _cee, "rerank": _listwise,
    "first_stage": lambda name, params, variant: (0, "no LLM"),
}
_NAME_RULES: dict[str, Callable[[str, Params, str], tuple[int, str]]] = {"hybrid": _evireform}


def question_calls(method: Method, variant: str, params: Params) -> tuple[int | None, str]:
    """Upper bound of LLM calls per question of ``method`` (``variant``) under ``params`` and
    its rule; a fused method sums its components; ``None`` for a plug-in method that calls
    an LLM (its bound is not known here)."""
    rule = _NAME_RULES.get(method.name) or _FAMILY_RULES.get(method.family)
    if rule is not None:
        return rule(method.name, params, variant)
    components = getattr(method, "components", None)
    if components is not None:
        parts = [(c.run, *question_calls(c.method, c.variant, params)) for c in components(params, variant)]
        if any(n is None for _, n, _ in parts):
            return None, "a component's bound is unknown"
        return sum(n or 0 for _, n, _ in parts), " + ".join(f"{run} {n}" for run, n, _ in parts)
    if not method.uses_llm:
        return 0, "no LLM"
    return None, f"unknown for the plug-in method {method.name!r}"


def estimate_calls(method: Method, variant: str, params: Params, corpus: pl.DataFrame | pd.DataFrame,
                   questions: int) -> CallEstimate:
    """Index calls and the per-question bound of running ``method`` (``variant``) on ``corpus``
    (``passage_id, title, text``; polars, or the pandas corpus of
    :class:`evichain.data.user.UserDataset` that ``flows/cli.py`` passes) and ``questions``
    questions (module docstring)."""
    per_question, rule = question_calls(method, variant, params)
    return CallEstimate(index_calls(method, variant, params, corpus, questions), per_question,
                        questions, rule)


# --------------------------------------------------------------------------- time
def seconds_per_call(llm: LLMParams, given: float | None = None) -> CallTime:
    """Seconds per call: ``given`` (the user's figure), else the documented figure of the
    backend (:data:`SECONDS_PER_CALL`; ``scripted/``: 0), else ``None`` (no figure)."""
    if given is not None:
        return CallTime(given, "your figure (--seconds-per-call)")
    if llm.model in SECONDS_PER_CALL:
        return CallTime(*SECONDS_PER_CALL[llm.model])
    if llm.model.startswith("scripted/"):
        return CallTime(0.0, "the scripted test provider answers at once")
    return CallTime(None, f"no documented figure for {llm.model}: give one with --seconds-per-call")


def call_time(calls: int, per_call: CallTime, concurrency: int) -> float | None:
    """Estimated seconds: ``calls × seconds per call / concurrency`` (``None`` without a figure)."""
    if per_call.seconds is None:
        return None
    return calls * per_call.seconds / max(1, concurrency)
