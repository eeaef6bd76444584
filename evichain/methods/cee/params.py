"""CEE parameters: the paper's defaults (CIKM '26 §3.1), variant switches, facet caps and scope.

``cee`` in ``params.yaml`` validates as :class:`CEEParams`; its ``facets`` block as
:class:`FacetParams`. Unknown keys are errors; cross-field rules raise errors naming the dotted
keys (e.g. ``cee.facets.max_pairs_per_passage (12) must not exceed cee.facets.n_neighbours (10)``).

Paper defaults: 10 nearest neighbours per passage, T = 4 rounds, K_cand = 10, K_final = 10,
α = β = 0.5. Settings the paper does not give (probes per round, facets per pair, the summary's
input size) are params with documented defaults.

Variants (:data:`VARIANTS`, Table 2 of the paper) are named overrides of the three switches;
``full`` is the block as written. ``robust`` is ours, not the paper's: it keeps the method and
adds three changes, each a param whose default leaves the paper-faithful variants unchanged
(``bridge_expansion``, ``facets.source: sentences``, ``coverage_normalise``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from evichain.params_base import (DATASETS, ParamsError, Section, UnitInterval, known_names,
                                  only_known, register_block, register_check)


class FacetRestriction(Section):
    """This machine's restriction of facet generation for named datasets (not the method's).

    On 2 cores with the offline 1.5B model, facets for every passage at the paper's 10
    neighbours are 18,390 LLM calls on MuSiQue-100 (README "CEE on this machine"). The datasets
    listed in ``datasets`` are run with ``facet_scope``, ``facet_scope_n`` and
    ``max_pairs_per_passage`` below instead of the block's own values; every other dataset (and
    every setting not named here) keeps the paper's defaults. The report labels such rows.
    """

    datasets: list[str] = []
    facet_scope: Literal["all", "reachable"] = "reachable"
    facet_scope_n: int = Field(3, ge=1, le=10_000)
    max_pairs_per_passage: int = Field(1, ge=1, le=1000)

    _known = known_names("datasets", DATASETS, "dataset")

    def overrides(self) -> dict[str, Any]:
        """The facet settings this restriction replaces."""
        return {"facet_scope": self.facet_scope, "facet_scope_n": self.facet_scope_n,
                "max_pairs_per_passage": self.max_pairs_per_passage}


class FacetParams(Section):
    """Offline contrastive facet construction (paper §2.3.1).

    * ``n_neighbours``: |R_i|, nearest neighbours by cosine similarity of the configured
      embedder (paper: 10).
    * ``max_pairs_per_passage``: cap on the (target, neighbour) pairs sent to the LLM per
      passage: the nearest ``max_pairs_per_passage`` of R_i (≤ ``n_neighbours``).
    * ``max_facets_per_pair``: M_{i,r} ≤ this (sent as ``maxItems`` and asked in the prompt).
    * ``facet_scope``: ``all`` = every passage is a target (the method); ``reachable`` = only
      the union over questions of each question's dense top-``facet_scope_n`` passages (a
      restriction for slow machines, not of the method; neighbours still come from the whole
      corpus, and passages outside the scope simply have no facets: C_d = ∅).
    * ``max_passage_words``: passages longer than this are cut (words) in the facet prompt.
    * ``checkpoint_shard``: passages per shard checkpoint (resumption).
    * ``max_failure_rate``: the stage fails above this fraction of failed pairs (after writing).
    * ``restricted``: datasets run with a machine restriction (:class:`FacetRestriction`);
      :meth:`for_dataset` gives the settings one dataset is run with.
    * ``source``: where C_d comes from. ``llm`` (the paper; default): the facet queries of
      ``facets.parquet`` (stage ``generate_facets``). ``sentences`` (ours, LLM-free, built inside
      the retrieval flow for *every* passage, whatever ``facet_scope``/``restricted`` say): with
      R_d the ``n_neighbours`` nearest passages of d and σ_j the sentences of d, encoded as
      ``"<title>: <sentence>"``, ``m(σ_j) = max_{r ∈ R_d} cos(φ(σ_j), φ(d_r))`` and C_d = the
      ``sentence_facets`` sentences with the lowest m (ties by sentence order); a passage with
      at most ``sentence_facets`` sentences keeps all of them.
    * ``sentence_facets``: M, facets per passage under ``source: sentences``.
    """

    n_neighbours: int = Field(10, ge=1, le=1000)
    max_pairs_per_passage: int = Field(10, ge=1, le=1000)
    max_facets_per_pair: int = Field(3, ge=1, le=20)
    facet_scope: Literal["all", "reachable"] = "all"
    facet_scope_n: int = Field(20, ge=1, le=10_000)
    max_passage_words: int = Field(400, ge=20, le=10_000)
    checkpoint_shard: int = Field(32, ge=1, le=100_000)
    max_failure_rate: UnitInterval = 0.05
    restricted: FacetRestriction = FacetRestriction()
    source: Literal["llm", "sentences"] = "llm"
    sentence_facets: int = Field(3, ge=1, le=100)

    @model_validator(mode="after")
    def _pairs_within_neighbours(self) -> "FacetParams":
        for key, pairs in (("max_pairs_per_passage", self.max_pairs_per_passage),
                           ("restricted.max_pairs_per_passage", self.restricted.max_pairs_per_passage)):
            if pairs > self.n_neighbours:
                raise ValueError(f"cee.facets.{key} ({pairs}) must not exceed "
                                 f"cee.facets.n_neighbours ({self.n_neighbours})")
        return self

    def is_restricted(self, dataset: str) -> bool:
        """Whether ``dataset`` runs under this machine's restriction (``restricted.datasets``)."""
        return dataset in self.restricted.datasets

    def for_dataset(self, dataset: str) -> "FacetParams":
        """The settings ``dataset`` is run with: the block, or its restriction where listed."""
        if not self.is_restricted(dataset):
            return self
        return self.model_copy(update=self.restricted.overrides())


class CEETuningParams(Section):
    """Grid of ``tune_cee`` (:mod:`evichain.methods.cee.tuning`), on ``tuning_datasets`` only.

    * ``objective``: per-question metrics whose means are summed and maximised.
    * ``bridge_inherit``: the γ values tried for the ``robust`` variant (first listed wins ties).
    """

    objective: list[str] = Field(default_factory=lambda: ["Recall@5", "Chain@5"], min_length=1)
    bridge_inherit: list[float] = Field(default_factory=lambda: [0.0, 0.25, 0.5, 0.75, 0.9, 1.0],
                                        min_length=1)

    @field_validator("bridge_inherit")
    @classmethod
    def _in_range(cls, v: list[float]) -> list[float]:
        bad = [x for x in v if not 0.0 <= x <= 1.0]
        if bad:
            raise ValueError(f"values must lie in [0, 1]; got {bad}")
        return v


class CEEParams(Section):
    """Online retrieval (paper §2.3.2–2.3.4) and the offline ``facets`` block.

    * ``rounds``: T; ``k_cand``: passages per probe per round (Eq. 1); ``k_final``: greedy
      picks (Eq. 8); ``alpha``: facet update strength (h̃); ``beta``: Eq. 6.
    * ``n_probes``: at most this many LLM probes per round (the paper gives no number).
    * ``question_as_probe``: q itself is a probe of round 1 and so of P(q) (the paper: "the
      first round uses the original question together with an initial set of probes").
    * ``summary_max_passages`` / ``summary_passage_words`` / ``summary_max_words``: the
      summary e_t sees the round's retrieved passages (round-robin over probes, distinct, at
      most this many, each cut to this many words) and is asked for at most this many words.
    * ``top_k``: run depth: the K_final greedy picks, then the rest of A(q) by s(d).
    * Switches (Table 2): ``coverage`` (off: rank A(q) by s), ``contrastive`` (off: g = sim,
      so s = s_base), ``sequential`` (off: round 1 only).
    * ``bridge_expansion`` (ours; default off = the paper's Eq. 1): after each round t,
      A_t(q) = A_{t−1}(q) ∪ ⋃_p Ret(p) ∪ B_t(q), where B_t(q) holds the passages whose title
      (≥ 4 characters; whole words, case-insensitive) occurs in the text of the round's scanned
      passages (``bridge_scan``: ``summary`` = the passages the summary e_t sees; ``retrieved``
      = every passage retrieved in round t), a passage's own title excluded, minus what is
      already in the pool, at most ``bridge_max_per_round`` of them, by sim(q, d) descending
      (ties by corpus order).
    * ``coverage_normalise`` (ours; default off = the paper's Eq. 7): the greedy selection uses
      Δ_cov(d | S) / |P(q)| instead of Δ_cov(d | S).
    * ``bridge_inherit`` (ours; γ ∈ [0, 1], default 0 = off): with ``bridge_expansion``, each
      bridge passage d scores s′(d) = max(s(d), γ · s′(src(d))), src(d) = the scanned passage
      that named it, before Eq. 8 (a second hop rarely resembles q; its source does). Without
      bridge expansion there are no bridge passages, so the paper's variants never use it; its
      value is chosen by ``tune_cee`` on ``tuning_datasets`` only (grid: ``tuning``,
      :class:`CEETuningParams`).
    """

    facets: FacetParams = FacetParams()
    rounds: int = Field(4, ge=1, le=20)
    k_cand: int = Field(10, ge=1, le=10_000)
    k_final: int = Field(10, ge=1, le=10_000)
    alpha: float = Field(0.5, ge=0.0)
    beta: UnitInterval = 0.5
    n_probes: int = Field(3, ge=1, le=20)
    question_as_probe: bool = True
    summary_max_passages: int = Field(5, ge=1, le=1000)
    summary_passage_words: int = Field(150, ge=10, le=10_000)
    summary_max_words: int = Field(80, ge=10, le=1000)
    top_k: int = Field(20, ge=1, le=100_000)
    passage_format: str = "{title}\n{text}"
    coverage: bool = True
    contrastive: bool = True
    sequential: bool = True
    bridge_expansion: bool = False
    bridge_max_per_round: int = Field(10, ge=1, le=10_000)
    bridge_scan: Literal["summary", "retrieved"] = "summary"
    coverage_normalise: bool = False
    bridge_inherit: UnitInterval = 0.0
    tuning: CEETuningParams = CEETuningParams()

    @model_validator(mode="after")
    def _consistent(self) -> "CEEParams":
        if self.k_final > self.top_k:
            raise ValueError(f"cee.k_final ({self.k_final}) must not exceed cee.top_k ({self.top_k})")
        if "{title}" not in self.passage_format and "{text}" not in self.passage_format:
            raise ValueError("cee.passage_format must contain {title} or {text}")
        return self

    @property
    def effective_rounds(self) -> int:
        """T, or 1 without sequential exploration."""
        return self.rounds if self.sequential else 1


VARIANTS: dict[str, dict[str, Any]] = {
    "full": {},
    "no_coverage": {"coverage": False},
    "no_contrastive": {"contrastive": False},
    "no_sequential": {"sequential": False},
    "robust": {"bridge_expansion": True, "coverage_normalise": True,
               "facets": {"source": "sentences"}},
}
"""Table 2 variants: ``full`` = ``cee`` as written; the others switch one component off.
``robust`` (ours) = ``full`` + bridge-title pool expansion + LLM-free sentence facets for every
passage + coverage gain normalised by |P(q)| (nested blocks such as ``facets`` are merged key by
key, so ``cee.facets`` keeps its other settings)."""


def _merged(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``update`` applied, nested mappings merged key by key."""
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def variant_params(params: CEEParams, variant: str) -> CEEParams:
    """``params`` with the switches of ``variant`` applied (validated again)."""
    if variant not in VARIANTS:
        raise ParamsError(f"unknown CEE variant '{variant}'; known: {sorted(VARIANTS)}")
    try:
        return CEEParams.model_validate(_merged(params.model_dump(), VARIANTS[variant]))
    except ValidationError as exc:
        msg = "; ".join(f"cee.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" if e["loc"]
                        else e["msg"] for e in exc.errors())
        raise ParamsError(f"variant '{variant}' is inconsistent with params cee: {msg}") from None


def _known_variants(names: list[str]) -> list[str]:
    """``cee_variants`` of ``params.yaml``: variants of :data:`VARIANTS`."""
    return only_known(names, sorted(VARIANTS), "CEE variant")


register_block("cee", CEEParams)
register_check("cee", "cee_variants", _known_variants)
