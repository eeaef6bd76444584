"""Parameters of the graph retrievers (``graph`` in ``params.yaml``).

Re-implementations of HippoRAG 2 (Gutiérrez et al. 2025, "From RAG to Memory"), CatRAG (Lau et
al. 2026, "Breaking the Static Graph") and PropRAG (Wang & Han 2025), sharing one extracted index
as EviReform Appendix C.6 describes. Defaults are the papers' (and, where a paper gives no
number, the released code's); each field says which. Unknown keys are errors; cross-field rules
name the dotted keys.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from evichain.params_base import (DATASETS, OpenUnitInterval, Section, UnitInterval, known_names,
                                  register_block)

METHODS: tuple[str, ...] = ("hipporag2", "catrag", "proprag")
OpenIEMode = Literal["llm", "propositions"]


class HippoRAG2Params(Section):
    """HippoRAG 2 online retrieval (paper §3; released code defaults).

    * ``linking_top_k``: facts linked to the question by dense similarity (5), and the number
      of seed phrase nodes kept after weighting (the code's ``link_top_k``, also 5).
    * ``recognition_memory``: the LLM filter over the linked facts (off = the paper's
      "w/o filter" ablation: every linked fact is kept).
    * ``filter_max_kept``: the filter keeps at most this many facts (the released filter
      prompt asks for "up to 4").
    """

    linking_top_k: int = Field(5, ge=1, le=100)
    recognition_memory: bool = True
    filter_max_kept: int = Field(4, ge=1, le=100)


class CatRAGParams(Section):
    """CatRAG's three changes to HippoRAG 2 (paper §3; released ``BaseConfig`` values).

    * ``symbolic_anchoring`` / ``anchor_weight``: query entities (LLM NER) linked to their
      nearest entity node become weak seeds of weight ε / |passages of the node| (ε = 0.2).
    * ``edge_weighting``: the LLM scores (0–10) the relation edges around the strongest
      ``max_scored_seeds`` (5) seeds; at most ``max_scored_edges`` (15) neighbours per seed
      after a vector pre-filter, ``score_batch`` (15) per call; pruned neighbours' edges are
      multiplied by ``pruned_edge_factor`` (0.3); a neighbour missing from the reply gets
      ``default_edge_score`` (4). Scores map to weights by the paper's projection
      (≤3 → 0, 4–6 → s/20, 7–9 → (s−3)/2, 10 → 5), times ``edge_weight_scale`` (2).
    * ``key_fact``: seed-entity → passage edges to passages holding a kept fact are multiplied
      by ``key_fact_boost`` (2.5), then the entity's passage edges are renormalised to their
      original total.
    * ``neighbour_words``: a neighbour is shown to the scorer with its other facts, in order,
      up to this many words (the paper shows an LLM summary of at most 150 words, built offline
      for every entity with > 3 facts; see the module docstring of ``catrag``).
    """

    symbolic_anchoring: bool = True
    anchor_weight: float = Field(0.2, ge=0.0, le=10.0)
    edge_weighting: bool = True
    max_scored_seeds: int = Field(5, ge=1, le=100)
    max_scored_edges: int = Field(15, ge=1, le=1000)
    score_batch: int = Field(15, ge=1, le=1000)
    pruned_edge_factor: float = Field(0.3, ge=0.0, le=10.0)
    default_edge_score: int = Field(4, ge=0, le=10)
    edge_weight_scale: float = Field(2.0, gt=0.0, le=100.0)
    key_fact: bool = True
    key_fact_boost: float = Field(2.5, ge=1.0, le=100.0)
    neighbour_words: int = Field(150, ge=0, le=10_000)


class PropRAGParams(Section):
    """PropRAG (paper §3; released code defaults), LLM-free at query time.

    * Beam search: ``n_candidates`` (200) propositions scored against the question, beam
      ``beam_width`` (4), paths of at most ``max_path_length`` (3) propositions; the top
      ``parallel_seeds`` (3) propositions may be appended to any path ("parallel reasoning").
      Two propositions connect when they share an entity or hold entities joined by a
      synonymy edge of weight ≥ ``synonym_threshold`` (0.75).
    * Path score: cosine of the question and the ``concatenate``d path text re-encoded (the
      paper) or the renormalised ``average`` of its proposition vectors. With
      ``prefilter_k`` > 0 candidates are first ranked by the average and only the top
      ``prefilter_k`` (the code's ``second_stage_filter_k`` = 40) are re-encoded.
    * Stage 1: entities of the top ``stage1_paths`` (20) paths, top ``stage1_entities`` (40) by
      summed path score, are seeds of weight 1 (passages: dense × passage_node_weight); PPR
      with ``stage1_damping`` (0.75).
    * Stage 2 (refined seeds): beam search again over the propositions of the top
      ``focus_top_k`` (50) passages; seeds from the top ``stage2_paths`` (5) paths and the
      initial beam, ``stage2_entities`` (5) each, weighted by their best path score; PPR with
      ``stage2_damping`` (0.45) on the focused subgraph; passages outside it keep their
      stage-1 score × ``outside_focus_scale`` (0.5) × the smallest focused score.
    """

    n_candidates: int = Field(200, ge=1, le=100_000)
    beam_width: int = Field(4, ge=1, le=100)
    max_path_length: int = Field(3, ge=1, le=10)
    parallel_seeds: int = Field(3, ge=0, le=100)
    synonym_threshold: UnitInterval = 0.75
    path_scoring: Literal["concatenate", "average"] = "concatenate"
    prefilter_k: int = Field(40, ge=0, le=100_000)
    stage1_paths: int = Field(20, ge=1, le=1000)
    stage1_entities: int = Field(40, ge=1, le=10_000)
    stage1_damping: OpenUnitInterval = 0.75
    focus_top_k: int = Field(50, ge=1, le=100_000)
    stage2_paths: int = Field(5, ge=1, le=1000)
    stage2_entities: int = Field(5, ge=1, le=10_000)
    stage2_damping: OpenUnitInterval = 0.45
    outside_focus_scale: UnitInterval = 0.5


class GraphParams(Section):
    """The ``graph`` section: shared OpenIE index, graph, PPR and the three retrievers.

    * ``openie``: ``llm`` = HippoRAG's NER + NER-conditioned triple extraction per passage
      through the LLM client; ``propositions`` = LLM-free triples from the EviReform
      proposition index (entities co-mentioned in one proposition → (e₁, proposition, e₂)).
      ``openie_by_dataset`` overrides it per dataset.
    * ``openie_max_failure_rate``: extract_triples fails above this fraction of failed passages
      (after writing its tables); ``openie_checkpoint_shard``: passages per checkpoint.
    * Graph (HippoRAG 2 §3 / code): synonymy edges between entity nodes whose embedding cosine
      is ≥ ``synonymy_threshold`` (0.8), among each node's ``synonymy_topk`` (2047) nearest,
      at most ``synonymy_max_per_node`` (101: the code stops after 100) per node, for names
      with more than ``synonymy_min_chars`` − 1 (2) alphanumeric characters.
    * PPR: ``damping`` (0.5, HippoRAG 2 and CatRAG); ``ppr_backend`` ``power`` (vectorised sparse
      power iteration to an L1 change < ``ppr_tol``, ≤ ``ppr_max_iter`` steps; default: ~5×
      faster here) or ``igraph`` (PRPACK, the originals' call); the tests check that both agree
      with networkx to 1e-9.
    * ``passage_node_weight``: passage seeds = min–max dense score × 0.05.
    * ``top_k``: passages written per question (HippoRAG 2's ``retrieval_top_k`` = 200).
    """

    methods: list[str] = Field(default_factory=lambda: list(METHODS))
    openie: OpenIEMode = "llm"
    openie_by_dataset: dict[str, OpenIEMode] = Field(default_factory=dict)
    openie_max_failure_rate: UnitInterval = 0.05
    openie_checkpoint_shard: int = Field(32, ge=1, le=100_000)
    passage_format: str = "{title}\n{text}"
    synonymy_threshold: UnitInterval = 0.8
    synonymy_topk: int = Field(2047, ge=1, le=1_000_000)
    synonymy_max_per_node: int = Field(101, ge=1, le=1_000_000)
    synonymy_min_chars: int = Field(3, ge=0, le=100)
    damping: OpenUnitInterval = 0.5
    passage_node_weight: float = Field(0.05, ge=0.0, le=100.0)
    ppr_backend: Literal["power", "igraph"] = "power"
    ppr_tol: float = Field(1e-10, gt=0.0, le=1e-2)
    ppr_max_iter: int = Field(1000, ge=1, le=100_000)
    top_k: int = Field(200, ge=1, le=100_000)
    hipporag2: HippoRAG2Params = HippoRAG2Params()
    catrag: CatRAGParams = CatRAGParams()
    proprag: PropRAGParams = PropRAGParams()

    _known_methods = known_names("methods", METHODS, "graph method")
    _known_datasets = known_names("openie_by_dataset", DATASETS, "dataset")

    @model_validator(mode="after")
    def _consistent(self) -> "GraphParams":
        if "{title}" not in self.passage_format and "{text}" not in self.passage_format:
            raise ValueError("graph.passage_format must contain {title} or {text}")
        if self.hipporag2.filter_max_kept > self.hipporag2.linking_top_k:
            raise ValueError(f"graph.hipporag2.filter_max_kept ({self.hipporag2.filter_max_kept}) "
                             f"must not exceed graph.hipporag2.linking_top_k "
                             f"({self.hipporag2.linking_top_k})")
        if self.proprag.parallel_seeds > self.proprag.n_candidates:
            raise ValueError("graph.proprag.parallel_seeds must not exceed graph.proprag.n_candidates")
        return self

    def openie_for(self, dataset: str) -> OpenIEMode:
        """The OpenIE mode of ``dataset`` (``openie_by_dataset`` wins over ``openie``)."""
        return self.openie_by_dataset.get(dataset, self.openie)


register_block("graph", GraphParams)
