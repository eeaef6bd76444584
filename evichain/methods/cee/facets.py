"""Offline contrastive facet construction (paper §2.3.1): neighbours, LLM facets, tables.

* R_i: the ``n_neighbours`` nearest passages of d_i by cosine similarity of the configured
  embedder (passage text = ``cee.passage_format``), d_i itself excluded, ties by stored order.
* Pairs: the nearest ``max_pairs_per_passage`` of R_i. Per pair one LLM call (:data:`FACETS`
  prompt) writes at most ``max_facets_per_pair`` queries answerable from d_i and not from d_r.
  A pair never raises: it is ``ok`` with its facets or ``failed`` with the client's failure.
* C_i = ∪_r C_{i,r}: facets of all pairs of d_i, whitespace-collapsed, case-insensitively
  distinct (first occurrence kept, pairs in neighbour order); replies shorter than
  :data:`MIN_FACET_WORDS` words are dropped (``n_facets`` counts the kept ones).
* Targets: every passage (``facet_scope: all``), or only those the evaluated questions can
  reach (``reachable``): the union over questions of each question's dense top-``facet_scope_n``
  pool — a restriction for machines where the LLM is slow, not part of the method.

LLM-free sentence facets (ours; ``cee.facets.source: sentences``, variant ``robust``;
:func:`sentence_facets`): for every passage d, with R_d its ``n_neighbours`` nearest passages
and σ_1 … σ_n its sentences (the EviReform sentence splitter), each encoded as
``"<title>: <sentence>"``, m(σ_j) = max_{r ∈ R_d} cos(φ(σ_j), φ(d_r)) and C_d = the
``sentence_facets`` (M) sentences with the lowest m, ties by sentence order (the sentences that
tell d apart from its neighbours); a passage with n ≤ M sentences keeps all of them. No LLM
call; the questions are not looked at.

Tables: facets ``(facet_id, passage_id, neighbour_id, facet_query)`` with
``facet_id = "<passage_id>#<ordinal>"``; status, one row per pair ``(passage_id, neighbour_id,
neighbour_rank, similarity, status, error_kind, error, n_facets, prompt_tokens,
completion_tokens)``. Tokens of a cache hit are those stored with the response, so the tables
do not depend on the cache state (deterministic outputs).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from evichain.checkpoint import read_shard, write_shard
from evichain.llm import LLMClient, LLMSuccess
from evichain.llm.cache import cache_key
from evichain.llm.types import Prompt, result_tokens
from evichain.methods.cee.params import FacetParams
from evichain.methods.cee.prompts import (clean_texts, cut_words, facet_prompt, minified,
                                          nonempty_check)
from evichain.retrieval.run import top_k_indices
from evichain.text.sentences import split_sentences

if TYPE_CHECKING:
    import pandas as pd

MIN_FACET_WORDS = 3
"""A facet is a question: shorter replies (e.g. a bare name, or a copied placeholder) are dropped."""
FACET_COLUMNS = ["facet_id", "passage_id", "neighbour_id", "facet_query"]
STATUS_COLUMNS = ["passage_id", "neighbour_id", "neighbour_rank", "similarity", "status",
                  "error_kind", "error", "n_facets", "prompt_tokens", "completion_tokens"]


@dataclass(frozen=True)
class Passage:
    """One corpus passage."""

    passage_id: str
    title: str
    text: str


# --------------------------------------------------------------------------- neighbours
def nearest_neighbours(E: np.ndarray, targets: Sequence[int], k: int,
                       block: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """R_i for each target row i: (indices, similarities), each len(targets) × min(k, N − 1).

    Cosine similarity of L2-normalised rows; the target itself excluded; ties by lower index.
    Computed in blocks of ``block`` targets (never an N × N matrix).
    """
    n = E.shape[0]
    k = min(k, n - 1)
    rows = np.asarray(targets, dtype=np.int64)
    idx = np.zeros((rows.size, max(k, 0)), dtype=np.int64)
    sims = np.zeros((rows.size, max(k, 0)), dtype=np.float64)
    for lo in range(0, rows.size, block):
        chunk = rows[lo:lo + block]
        scores = (E[chunk].astype(np.float64) @ E.T.astype(np.float64))
        scores[np.arange(chunk.size), chunk] = -np.inf
        for r, row in enumerate(scores):
            top = top_k_indices(row, k)
            idx[lo + r], sims[lo + r] = top, row[top]
    return idx, sims


def reachable_targets(Q: np.ndarray, E: np.ndarray, n: int) -> np.ndarray:
    """Sorted rows of ∪_q dense-top-``n``(q): the passages the evaluated questions can reach."""
    scores = Q.astype(np.float64) @ E.T.astype(np.float64)
    found: set[int] = set()
    for row in scores:
        found.update(int(i) for i in top_k_indices(row, n))
    return np.array(sorted(found), dtype=np.int64)


def select_targets(params: FacetParams, E: np.ndarray, Q: np.ndarray | None) -> np.ndarray:
    """Target rows under ``facet_scope`` (``reachable`` needs the question embeddings Q)."""
    if params.facet_scope == "all":
        return np.arange(E.shape[0], dtype=np.int64)
    if Q is None:
        raise ValueError("cee.facets.facet_scope: reachable needs the questions' embeddings")
    return reachable_targets(Q, E, params.facet_scope_n)


@dataclass(frozen=True)
class FacetPair:
    """A (target, neighbour) pair: the neighbour's rank in R_i (1-based) and its similarity."""

    target: str
    neighbour: str
    rank: int
    similarity: float


def pair_plan(passage_ids: Sequence[str], targets: np.ndarray, idx: np.ndarray, sims: np.ndarray,
              max_pairs: int) -> dict[str, list[FacetPair]]:
    """target id → its pairs (nearest ``max_pairs`` neighbours), targets in stored order."""
    plan: dict[str, list[FacetPair]] = {}
    for t, row, srow in zip(targets, idx, sims):
        tid = passage_ids[int(t)]
        plan[tid] = [FacetPair(tid, passage_ids[int(j)], r + 1, round(float(s), 6))
                     for r, (j, s) in enumerate(zip(row[:max_pairs], srow[:max_pairs]))]
    return plan


# --------------------------------------------------------------------------- sentence facets
@dataclass(frozen=True)
class SentenceCandidates:
    """Every sentence of the corpus: its passage row, its ordinal in the passage and its facet
    text ``"<title>: <sentence>"`` (passages in stored order, sentences in text order)."""

    owner: np.ndarray
    position: np.ndarray
    texts: list[str]


def sentence_candidates(passages: Sequence[Passage]) -> SentenceCandidates:
    """Split every passage into sentences (:func:`~evichain.text.sentences.split_sentences`)."""
    owner: list[int] = []
    position: list[int] = []
    texts: list[str] = []
    for row, p in enumerate(passages):
        for j, sentence in enumerate(split_sentences(p.text)):
            owner.append(row)
            position.append(j)
            texts.append(f"{p.title}: {sentence}")
    return SentenceCandidates(np.asarray(owner, dtype=np.int64),
                              np.asarray(position, dtype=np.int64), texts)


def neighbour_max_similarity(V: np.ndarray, owner: np.ndarray, E: np.ndarray,
                             neighbours: np.ndarray, block: int = 2048) -> np.ndarray:
    """m(σ) = max_{r ∈ R_{d(σ)}} cos(φ(σ), φ(d_r)) for every sentence row of V (n_s).

    ``owner[s]`` is σ's passage row, ``neighbours`` the R_d rows per passage (N × k). Vectorised
    in blocks of ``block`` sentences (never an n_s × k × dim tensor). Without neighbours
    (k = 0) every m is −∞, so the sentence order decides.
    """
    n_s = V.shape[0]
    out = np.full(n_s, -np.inf)
    if n_s == 0 or neighbours.shape[1] == 0:
        return out
    Vn = _unit(np.asarray(V, dtype=np.float64))
    En = _unit(np.asarray(E, dtype=np.float64))
    for lo in range(0, n_s, block):
        hi = min(n_s, lo + block)
        N = En[neighbours[owner[lo:hi]]]                               # b × k × dim
        out[lo:hi] = np.einsum("bd,bkd->bk", Vn[lo:hi], N).max(axis=1)
    return out


def _unit(X: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(X, axis=-1, keepdims=True)
    return np.divide(X, norm, out=np.zeros_like(X), where=norm > 0)


def select_sentence_facets(owner: np.ndarray, position: np.ndarray, max_sim: np.ndarray,
                           m: int) -> np.ndarray:
    """Indices of the kept sentences: per passage the ``m`` with the lowest ``max_sim``, ties by
    ``position`` (a passage with ≤ m sentences keeps all). Returned ascending (passage, then
    sentence order)."""
    if owner.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((position, max_sim, owner))           # by passage, then m, then ordinal
    sorted_owner = owner[order]
    first = np.flatnonzero(np.r_[True, sorted_owner[1:] != sorted_owner[:-1]])
    group_start = np.repeat(first, np.diff(np.r_[first, sorted_owner.size]))
    rank = np.arange(sorted_owner.size) - group_start
    return np.sort(order[rank < m])


@dataclass(frozen=True)
class SentenceFacets:
    """Sentence facets of a corpus: owner rows, texts and embeddings of the kept sentences, and
    the counts for the stage summary."""

    owner: np.ndarray
    texts: list[str]
    vectors: np.ndarray
    info: dict[str, Any]


def sentence_facets(passages: Sequence[Passage], E: np.ndarray, n_neighbours: int, m: int,
                    encode: Callable[[list[str]], np.ndarray],
                    log: Callable[..., None] | None = None) -> SentenceFacets:
    """C_d for every passage (module docstring, "LLM-free sentence facets").

    ``E``: the passage embeddings (stored order); ``encode``: texts → embeddings (the flow's
    cached embedding service); ``log``: an optional ``(fmt, *args)`` logger for progress.
    """
    def say(fmt: str, *args: object) -> None:
        if log is not None:
            log(fmt, *args)

    cands = sentence_candidates(passages)
    say("sentence facets: %d sentences in %d passages; encoding", len(cands.texts), len(passages))
    V = (np.asarray(encode(cands.texts), dtype=np.float64) if cands.texts
         else np.zeros((0, E.shape[1])))
    say("sentence facets: %d nearest neighbours of %d passages", n_neighbours, len(passages))
    idx, _ = nearest_neighbours(E, np.arange(len(passages)), n_neighbours)
    max_sim = neighbour_max_similarity(V, cands.owner, E, idx)
    keep = select_sentence_facets(cands.owner, cands.position, max_sim, m)
    owner = cands.owner[keep]
    info = {"source": "sentences", "n_neighbours": int(idx.shape[1]), "sentence_facets": m,
            "passages": len(passages), "sentences": len(cands.texts), "facets": int(keep.size),
            "passages_with_facets": int(np.unique(owner).size)}
    say("sentence facets: %d facets for %d of %d passages", info["facets"],
        info["passages_with_facets"], len(passages))
    return SentenceFacets(owner, [cands.texts[i] for i in keep], V[keep], info)


# --------------------------------------------------------------------------- LLM
@dataclass
class PairOutcome:
    """Facets and the status row of one pair."""

    facets: list[str] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status.get("status") == "ok"


def step_tokens(client: LLMClient, result: Any) -> tuple[int, int]:
    """(prompt, completion) tokens of a call; for a cache hit, those stored with it."""
    return result_tokens(result)


def facet_data(target: Passage, reference: Passage, max_words: int) -> str:
    """The user message of the facet prompt: minified JSON with both passages as data."""
    return minified({"target": {"title": target.title, "text": cut_words(target.text, max_words)},
                     "reference": {"title": reference.title,
                                   "text": cut_words(reference.text, max_words)}})


def generate_pair_facets(client: LLMClient, pair: FacetPair, target: Passage, reference: Passage,
                         params: FacetParams, prompt: Prompt[Any] | None = None) -> PairOutcome:
    """One LLM call for (d_i, d_r): its cleaned facets, or a ``failed`` status (never raises)."""
    prompt = prompt or facet_prompt(params.max_facets_per_pair)
    result = client.call(prompt, check=nonempty_check("facets"),
                         data=facet_data(target, reference, params.max_passage_words))
    pt, ct = step_tokens(client, result)
    row = {"passage_id": pair.target, "neighbour_id": pair.neighbour,
           "neighbour_rank": pair.rank, "similarity": pair.similarity, "status": "ok",
           "error_kind": "", "error": "", "n_facets": 0, "prompt_tokens": pt,
           "completion_tokens": ct}
    if not isinstance(result, LLMSuccess):
        return PairOutcome([], {**row, **result.status_row()})
    facets = clean_texts(result.value.facets, params.max_facets_per_pair, MIN_FACET_WORDS)
    return PairOutcome(facets, {**row, "n_facets": len(facets)})


def pair_cached(client: LLMClient, prompt: Prompt[Any], target: Passage, reference: Passage,
                params: FacetParams) -> bool:
    """Whether the pair's call is already in the LLM cache (same key recipe as the client)."""
    messages = prompt.messages(data=facet_data(target, reference, params.max_passage_words))
    key = cache_key(model=client.params.model, messages=messages, sampling=client.sampling(),
                    schema=prompt.json_schema(), prompt=prompt.key)
    return client.cache.get(key) is not None


# --------------------------------------------------------------------------- tables
def facet_table(outcomes: Iterable[PairOutcome], passage_order: Sequence[str]) -> pl.DataFrame:
    """C_i per passage (distinct case-insensitively, first occurrence kept), passages in stored
    order, then neighbour rank; ``facet_id = "<passage_id>#<k>"`` (k-th distinct facet).
    Column types are inferred from the rows (no rows: ``Null`` columns, as pandas wrote)."""
    rank = {pid: i for i, pid in enumerate(passage_order)}
    ordered = sorted(outcomes, key=lambda o: (rank[o.status["passage_id"]],
                                              o.status["neighbour_rank"]))
    rows: list[tuple[str, str, str, str]] = []
    seen: dict[str, set[str]] = {}
    for o in ordered:
        pid = o.status["passage_id"]
        have = seen.setdefault(pid, set())
        for text in o.facets:
            if text.casefold() not in have:
                have.add(text.casefold())
                rows.append((f"{pid}#{len(have) - 1}", pid, o.status["neighbour_id"], text))
    return pl.DataFrame(rows, schema=FACET_COLUMNS, orient="row", infer_schema_length=None)


STATUS_TYPES = {"neighbour_rank": pl.Int32, "similarity": pl.Float64, "n_facets": pl.Int32,
                "prompt_tokens": pl.Int64, "completion_tokens": pl.Int64}
"""The numeric status columns' stored types (the others are inferred from the rows)."""


def status_table(outcomes: Iterable[PairOutcome], passage_order: Sequence[str]) -> pl.DataFrame:
    """One status row per pair, sorted by (stored passage order, neighbour rank); numeric
    columns typed by :data:`STATUS_TYPES`."""
    rank = {pid: i for i, pid in enumerate(passage_order)}
    rows = sorted((o.status for o in outcomes),
                  key=lambda r: (rank[r["passage_id"]], r["neighbour_rank"]))
    df = pl.from_dicts(rows, schema=STATUS_COLUMNS, infer_schema_length=None)
    return df.with_columns(pl.col(c).cast(t) for c, t in STATUS_TYPES.items())


def facet_summary(status: pl.DataFrame, facets: pl.DataFrame, n_passages: int) -> dict[str, Any]:
    """Counts for the stage summary: passages, targets (distinct status passages), pairs ok /
    failed (``status == "failed"``), failure_rate = failed / max(1, pairs) to 4 places, facets,
    passages with facets, failed pairs per non-null ``error_kind`` and the token sums."""
    failed = status.filter(pl.col("status") == "failed")
    kinds = failed.drop_nulls("error_kind").group_by("error_kind").len()
    n = status.height
    return {"passages": n_passages, "targets": status["passage_id"].drop_nulls().n_unique(),
            "pairs": n, "pairs_ok": n - failed.height, "pairs_failed": failed.height,
            "failure_rate": round(failed.height / max(1, n), 4), "facets": facets.height,
            "passages_with_facets": facets["passage_id"].drop_nulls().n_unique(),
            "failure_kinds": {str(k): int(v) for k, v in kinds.iter_rows()},
            "prompt_tokens": int(status["prompt_tokens"].sum()),
            "completion_tokens": int(status["completion_tokens"].sum())}


# --------------------------------------------------------------------------- cost estimate
@dataclass(frozen=True)
class CostEstimate:
    """Expected tokens (and USD for a priced hosted model) of the pairs still to call."""

    model: str
    pairs: int
    prompt_tokens: int
    completion_tokens: int
    usd: float | None
    note: str

    def line(self) -> str:
        cost = f"~${self.usd:.4f}" if self.usd is not None else f"cost unknown ({self.note})"
        return (f"facet generation with {self.model}: {self.pairs} LLM calls, ~{self.prompt_tokens}"
                f" prompt + ~{self.completion_tokens} completion tokens, {cost}")


def _token_counter(model: str) -> Any:
    """Tokens of a text: litellm's counter for hosted models, ~4 characters per token else."""
    def rough(text: str) -> int:
        return max(1, len(text) // 4)

    if model.startswith(("local/", "scripted/")):
        return rough
    import litellm

    def counted(text: str) -> int:
        try:
            return int(litellm.token_counter(model=model, text=text))
        except Exception:  # unknown tokenizer: fall back to the rough count
            return rough(text)

    return counted


def price(model: str, prompt_tokens: int, completion_tokens: int) -> tuple[float | None, str]:
    """USD from litellm's price table (``litellm.model_cost`` / ``cost_per_token``)."""
    if model.startswith(("local/", "scripted/")):
        return 0.0, "local model: no price"
    import litellm

    try:
        p, c = litellm.cost_per_token(model=model, prompt_tokens=prompt_tokens,
                                      completion_tokens=completion_tokens)
    except Exception:
        return None, f"'{model}' is not in litellm.model_cost"
    return float(p) + float(c), "litellm.model_cost"


def estimate_cost(model: str, pairs: Sequence[FacetPair], passages: Mapping[str, Passage],
                  params: FacetParams, prompt: Prompt[Any] | None = None) -> CostEstimate:
    """Token and cost estimate of ``pairs`` before a long run (facet prompt per pair; the
    completion is taken as 24 tokens per facet + 8)."""
    count = _token_counter(model)
    prompt = prompt or facet_prompt(params.max_facets_per_pair)
    per_passage: dict[str, int] = {}

    def tokens(pid: str) -> int:
        if pid not in per_passage:
            p = passages[pid]
            per_passage[pid] = count(p.title + " " + cut_words(p.text, params.max_passage_words))
        return per_passage[pid]

    system = count(prompt.system) + 24
    pt = sum(system + tokens(p.target) + tokens(p.neighbour) for p in pairs)
    ct = len(pairs) * (24 * params.max_facets_per_pair + 8)
    usd, note = price(model, pt, ct)
    return CostEstimate(model, len(pairs), pt, ct, usd, note)


def load_passages(corpus: pl.DataFrame | pd.DataFrame) -> list[Passage]:
    """Corpus rows as :class:`Passage` in stored order (polars, or pandas from the methods'
    context)."""
    return [Passage(str(p), str(t), str(x))
            for p, t, x in zip(*(corpus[c].to_list() for c in ("passage_id", "title", "text")))]


# --------------------------------------------------------------------------- checkpoints
def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def shard_key(client: LLMClient, prompt: Prompt[Any], params: FacetParams,
              pairs: Sequence[FacetPair], passages: Mapping[str, Passage]) -> str:
    """Hash of (model, sampling, prompt name@version and text, caps, the shard's pair ids and
    passage text hashes)."""
    ids = sorted({p.target for p in pairs} | {p.neighbour for p in pairs})
    payload = {"model": client.params.model, "sampling": client.sampling(), "prompt": prompt.key,
               "system": _text_hash(prompt.system), "max_words": params.max_passage_words,
               "max_facets": params.max_facets_per_pair,
               "pairs": [(p.target, p.neighbour) for p in pairs],
               "texts": [(pid, _text_hash(passages[pid].title + "\n" + passages[pid].text))
                         for pid in ids]}
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def load_shard(path: Path) -> dict[tuple[str, str], PairOutcome]:
    """Finished pairs of a shard checkpoint ((target, neighbour) → outcome); {} if none."""
    data = read_shard(path)
    if data is None:
        return {}
    out = {}
    for o in data.get("outcomes", []):
        outcome = PairOutcome(list(o["facets"]), dict(o["status"]))
        out[(outcome.status["passage_id"], outcome.status["neighbour_id"])] = outcome
    return out


def save_shard(path: Path, outcomes: Sequence[PairOutcome]) -> None:
    """Write a shard checkpoint atomically."""
    write_shard(path, outcomes)
