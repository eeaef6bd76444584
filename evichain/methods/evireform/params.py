"""EviReform parameters: paper defaults (§3, §4.1, Appendix C.7 Tables C.5/C.6).

``evireform`` in ``params.yaml`` validates as :class:`EviReformParams`; its ``index`` block as
:class:`IndexParams`. Every section forbids unknown keys; cross-field rules raise errors that
name the dotted keys involved (e.g. ``evireform.residual_only requires
evireform.reformulation: true``).

Variants (base, reform_only, …) are named overrides of the switches below, applied by
:func:`evichain.methods.evireform.variants.variant_params`; ``full`` uses the block as written.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from evichain.params_base import Section, only_known, register_block, register_check


class IndexParams(Section):
    """Index construction (paper §3.4): proposition extraction and entity canonicalisation.

    * ``extractor``: ``llm`` = Listing 11 per passage (the paper); ``sentences`` = LLM-free,
      one proposition per sentence with title-match + pattern entities (see ``extract``).
    * ``fuzzy_threshold``: rapidfuzz ``fuzz.ratio`` (0–100) above which two normalised
      mentions merge; 100 disables fuzzy merging. Two corpus titles never merge.
    * ``fuzzy_min_chars``: shorter normalised mentions merge only when identical.
    * ``max_failure_rate``: the extraction stage fails when more than this fraction of
      passages failed after retries (failures are recorded either way).
    * ``failure_fallback``: what a failed passage contributes: ``sentences`` (its sentence
      propositions, flagged in the status table) or ``none`` (no propositions).
    * ``checkpoint_shard``: passages per shard checkpoint of the LLM extraction.
    * ``sentence_title_prefix``: sentence propositions read ``"<title>: <sentence>"`` so that a
      sentence using a pronoun stays self-contained (Listing 11 rule 2, approximated).
    * ``sentence_title_entity``: each sentence proposition lists its passage title as an entity.
    * ``max_tokens``: output budget of one extraction call (replaces ``llm.max_tokens`` there):
      a 418-word 2Wiki passage yields more than 1,024 tokens of propositions JSON.
    * ``extractor_by_dataset``: per-dataset override of ``extractor`` (e.g. ``sentences`` for
      the 6,119-passage 2Wiki corpus, which LLM extraction cannot cover on 2 cores).
    """

    extractor: Literal["llm", "sentences"] = "llm"
    fuzzy_threshold: float = Field(95.0, ge=50.0, le=100.0)
    fuzzy_min_chars: int = Field(4, ge=1, le=100)
    max_failure_rate: float = Field(0.1, ge=0.0, le=1.0)
    failure_fallback: Literal["none", "sentences"] = "sentences"
    checkpoint_shard: int = Field(32, ge=1, le=100_000)
    sentence_title_prefix: bool = True
    sentence_title_entity: bool = True
    extractor_by_dataset: dict[str, Literal["llm", "sentences"]] = Field(default_factory=dict)
    max_tokens: int = Field(2048, ge=64, le=32768)

    def for_dataset(self, dataset: str) -> "IndexParams":
        """These settings with ``extractor`` as ``extractor_by_dataset`` sets it for ``dataset``."""
        extractor = self.extractor_by_dataset.get(dataset, self.extractor)
        return self.model_copy(update={"extractor": extractor})


class RobustParams(Section):
    """Settings of the ``robust`` and ``hybrid`` variants (ours, not the paper's; issue 38).

    Tuned on ``2wiki_tune_s`` (2Wiki reliable questions 101-200, outside every reported
    sample) by ``tune_evireform``; the paper-faithful variants never read this block.

    * ``backstop_eps``: ε of the dense backstop s′ = s + ε û, û = the candidates' u
      L1-normalised (0 = off).
    * ``backfill``: the seed set S_q is filled up to ``max_selected`` from the candidate
      ranking (E_q, the evidence shown to the reformulator, stays the LLM's ids).
    * ``k_r``: propositions per residual query (replaces ``evireform.k_r``).
    * ``coverage_pool``: ``hybrid``: the readout's top passages that form the pool A(q).
    * ``coverage_weight``: ``hybrid``: λ of d* = argmax s(d) + λ Δ_cov(d | S)/|P(q)|.
    """

    backstop_eps: float = Field(0.5, ge=0.0, le=100.0)
    backfill: bool = True
    k_r: int = Field(2, ge=1, le=1000)
    coverage_pool: int = Field(10, ge=1, le=10_000)
    coverage_weight: float = Field(0.25, ge=0.0, le=100.0)


class TuningParams(Section):
    """Grids of ``tune_evireform`` (:mod:`evichain.methods.evireform.tuning`).

    * ``objective``: per-question metrics whose means are summed and maximised.
    * ``backstop_eps``, ``backfill``, ``k_r``: the ``robust`` grid (full cross product).
    * ``coverage_pool``, ``coverage_weight``: the ``hybrid`` grid, searched with the best
      ``robust`` values fixed.
    """

    objective: list[str] = Field(default_factory=lambda: ["Recall@5", "Chain@5"], min_length=1)
    backstop_eps: list[float] = Field(default_factory=lambda: [0.0, 0.25, 0.5, 1.0, 2.0], min_length=1)
    backfill: list[bool] = Field(default_factory=lambda: [False, True], min_length=1)
    k_r: list[int] = Field(default_factory=lambda: [2, 4, 8], min_length=1)
    coverage_pool: list[int] = Field(default_factory=lambda: [10, 20, 30, 50], min_length=1)
    coverage_weight: list[float] = Field(default_factory=lambda: [0.25, 0.5, 1.0, 2.0, 4.0], min_length=1)


SweepKey = Literal["alpha", "beta", "k_r", "max_residual_queries"]
"""The parameters of the one-at-a-time sweep (paper §A.6: α, β, k_r, L)."""

UnitValue = Annotated[float, Field(ge=0.0, le=1.0)]


class SweepParams(Section):
    """One-at-a-time sweep of ``sweep_evireform`` (paper §A.6, Fig. A.2, Tables A.8–A.10).

    The default configuration is variant ``full`` with the ``evireform`` block as written;
    every other configuration sets ONE parameter of the block to one of the values below and
    leaves the rest as written (a value equal to the block's own is the default configuration,
    evaluated once). :mod:`evichain.methods.evireform.sweep` lists the configurations.

    * ``datasets``: where the stage runs (its ``dvc.yaml`` matrix).
    * ``alpha``, ``beta`` (Eq. 14, Eq. 11), ``k_r`` (Eq. 10), ``max_residual_queries`` (L,
      Listing 13): the values of each parameter.
    * ``swept``: the parameters the stage evaluates, in this order. α, β and (with
      ``rounds: 1``) k_r change nothing the LLM sees, so they replay the default's answers with
      0 model calls (checked); L bounds Listing 13's schema, so each of its other values needs
      one new reformulation call per question that reformulates.
    * ``metrics``: per-question metrics whose means, 95% bootstrap CIs and paired differences
      against the default the stage writes.
    * ``figure_metrics``: the figure's rows (one panel per parameter in each row).
    """

    datasets: list[str] = Field(default_factory=lambda: ["2wiki_s", "musique", "hotpotqa_s"])
    alpha: list[UnitValue] = Field(default_factory=lambda: [0.25, 0.5, 0.75], min_length=1)
    beta: list[UnitValue] = Field(default_factory=lambda: [0.25, 0.5, 0.75], min_length=1)
    k_r: list[Annotated[int, Field(ge=1, le=1000)]] = Field(default_factory=lambda: [1, 2, 4, 8],
                                                            min_length=1)
    max_residual_queries: list[Annotated[int, Field(ge=1, le=3)]] = Field(
        default_factory=lambda: [1, 2, 3], min_length=1)
    swept: list[SweepKey] = Field(default_factory=lambda: ["alpha", "beta", "k_r", "max_residual_queries"])
    metrics: list[str] = Field(default_factory=lambda: ["Recall@5", "Recall@10", "Recall@20", "Chain@5"],
                               min_length=1)
    figure_metrics: list[str] = Field(default_factory=lambda: ["Recall@5", "Chain@5"], min_length=1)

    @model_validator(mode="after")
    def _distinct(self) -> "SweepParams":
        for key in ("alpha", "beta", "k_r", "max_residual_queries", "swept", "metrics", "figure_metrics"):
            values = getattr(self, key)
            if len(set(values)) != len(values):
                raise ValueError(f"evireform.sweep.{key} repeats a value: {values}")
        outside = [m for m in self.figure_metrics if m not in self.metrics]
        if outside:
            raise ValueError(f"evireform.sweep.figure_metrics {outside} must also be in "
                             f"evireform.sweep.metrics {self.metrics}")
        return self


class EviReformParams(Section):
    """Online retrieval (Steps 1–7 of DESIGN §4; paper §3.5–3.8, Appendix A.2/A.4/A.6).

    Paper defaults: 100 candidates, ≤ 12 selected, ≤ L = 3 residual queries, k_r = 2,
    α = β = 0.5, one propagation step, 1/√|P_j| readout, one round.

    Switches (the variants of Appendix A.2/A.4 are combinations of these):

    * ``reformulation``: residual queries from (q, E_q) (Listing 13; Listing 16 when rounds > 1).
    * ``propagation``: Eq. 12–14; off means z = s.
    * ``residual_only``: s = r instead of β·b + (1−β)·r (falls back to b when V is empty).
    * ``repeat_question``: the residual channel retrieves |V|·k_r propositions with the
      original question instead (|V| from the same question's reformulation: matched count).
    * ``reorder``: the Listing 15 judge orders the initial pool (≤ ``reorder_pool`` passages);
      output is that order only (no reformulation, no propagation).
    * ``rounds``: 1 = Listing 13; 2–3 = the bounded gap controller of Listing 16 (Eq. 19).
    * ``selection``: ``llm`` = Listing 12; ``top`` = the ``max_selected`` highest candidates
      (an LLM-free control, not in the paper).

    Our additions (off in every paper variant; the ``robust`` / ``hybrid`` variants switch them
    on with the values of the ``robust`` block, :class:`RobustParams`):

    * ``backstop_eps``, ``backfill``: see :class:`RobustParams`.
    * ``tail_order``: passages after the last positive readout score come in ``stored`` corpus
      order (paper C.1 tie rule) or by ``score`` = max_{i ∈ P_j} u_i, the question similarity
      of their best proposition (a real score: the 2Wiki corpus is stored by question, so the
      stored order hands out passages by position).
    * ``final``: ``readout`` = Eq. 15 ranking; ``coverage`` = the hybrid's coverage-aware
      greedy selection over the readout's top ``coverage_pool`` passages.
    """

    index: IndexParams = IndexParams()
    n_candidates: int = Field(100, ge=1, le=10_000)
    max_selected: int = Field(12, ge=1, le=1000)
    max_residual_queries: int = Field(3, ge=1, le=3)
    k_r: int = Field(2, ge=1, le=1000)
    alpha: float = Field(0.5, ge=0.0, le=1.0)
    beta: float = Field(0.5, ge=0.0, le=1.0)
    propagation_steps: int = Field(1, ge=1, le=10)
    readout: Literal["sqrt", "sum", "mean"] = "sqrt"
    rounds: int = Field(1, ge=1, le=3)
    top_k: int = Field(20, ge=1, le=100_000)
    pool_size: int = Field(20, ge=1, le=1000)
    passage_format: str = "{title}\n{text}"
    selection: Literal["llm", "top"] = "llm"
    reformulation: bool = True
    propagation: bool = True
    residual_only: bool = False
    repeat_question: bool = False
    reorder: bool = False
    reorder_pool: int = Field(40, ge=1, le=200)
    backstop_eps: float = Field(0.0, ge=0.0, le=100.0)
    backfill: bool = False
    tail_order: Literal["stored", "score"] = "stored"
    final: Literal["readout", "coverage"] = "readout"
    coverage_pool: int = Field(30, ge=1, le=10_000)
    coverage_weight: float = Field(1.0, ge=0.0, le=100.0)
    robust: RobustParams = RobustParams()
    tuning: TuningParams = TuningParams()
    sweep: SweepParams = SweepParams()

    @model_validator(mode="after")
    def _consistent_switches(self) -> "EviReformParams":
        needs_reform = {"residual_only": self.residual_only, "repeat_question": self.repeat_question,
                        "rounds": self.rounds > 1}
        for key, on in needs_reform.items():
            if on and not self.reformulation:
                raise ValueError(f"evireform.{key} requires evireform.reformulation: true")
        if self.residual_only and self.repeat_question:
            raise ValueError("evireform.residual_only and evireform.repeat_question exclude each other")
        if self.final == "coverage" and self.reorder:
            raise ValueError("evireform.final: coverage needs the readout; it excludes evireform.reorder")
        if self.reorder and (self.reformulation or self.propagation):
            raise ValueError("evireform.reorder is a control without reformulation or propagation: "
                             "set evireform.reformulation and evireform.propagation to false")
        if self.max_selected > self.n_candidates:
            raise ValueError(f"evireform.max_selected ({self.max_selected}) must not exceed "
                             f"evireform.n_candidates ({self.n_candidates})")
        if "{title}" not in self.passage_format and "{text}" not in self.passage_format:
            raise ValueError("evireform.passage_format must contain {title} or {text}")
        return self


def _known_variants(names: list[str]) -> list[str]:
    """``evireform_variants`` of ``params.yaml``: variants of :mod:`.variants` (paper or ours)."""
    from evichain.methods.evireform.variants import OURS, VARIANTS

    return only_known(names, sorted([*VARIANTS, *OURS]), "EviReform variant")


register_block("evireform", EviReformParams)
register_check("evireform", "evireform_variants", _known_variants)
