"""Typed, validated pipeline parameters (``params.yaml``).

Every section is a pydantic model with ``extra="forbid"``: an unknown key or an out-of-range
value fails with :class:`ParamsError`, whose message names the file, the dotted key and what
is wrong, e.g. ``params.yaml: retrieval.bm25.k1: Input should be greater than 0 (got -1)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from evichain.data.params import DataParams, DemoParams, MedicalChunking, SampleParams
from evichain.embed.params import EmbedParams
from evichain.llm.params import FaultParams, LLMParams, LocalLLMParams
from evichain.methods.cee.params import CEEParams
from evichain.methods.evireform.params import EviReformParams
from evichain.methods.expansion.params import ExpansionParams
from evichain.methods.graph.params import GraphParams
from evichain.methods.iterative.params import IterativeParams
from evichain.methods.rerank.params import RerankParams
from evichain.params_base import (DATASETS, ParamsError, Section, error_details, only_known,
                                  registered_blocks)
from evichain.qa.medical_params import MedicalQAParams
from evichain.qa.params import ReadParams
from evichain.retrieval.params import BM25Params, DenseParams, FusionParams, RetrievalParams

__all__ = [
    "BM25Params", "CEEParams", "DATASETS", "DataParams", "DemoParams", "DenseParams", "EmbedParams",
    "EvaluateParams", "EviReformParams", "ExpansionParams", "FaultParams", "FusionParams", "GraphParams",
    "IterativeParams", "LLMParams", "LocalLLMParams", "MedicalChunking", "MedicalQAParams",
    "OrchestrationParams", "Params", "ParamsError", "ReadParams", "RerankParams", "ReportParams",
    "RetrievalParams", "SampleParams", "Section", "load_params", "parse_params",
]


class EvaluateParams(Section):
    """Retrieval evaluation: cutoffs and the 2Wiki reliable-gold filter."""

    ks: list[int] = Field(default_factory=lambda: [1, 2, 5, 10, 20])
    twowiki_reliable_only: bool = True

    @field_validator("ks")
    @classmethod
    def _positive_sorted(cls, v: list[int]) -> list[int]:
        if not v or any(k < 1 for k in v):
            raise ValueError("must be a non-empty list of positive cut-offs")
        return sorted(set(v))


class ReportParams(Section):
    """The paper-shaped report: bootstrap settings and the method compared against the rest."""

    reference_method: str = "evireform-full"
    bootstrap_resamples: int = Field(10000, ge=100, le=1000000)
    bootstrap_metrics: list[str] = Field(default_factory=lambda: ["Recall@5", "Recall@10", "F1", "EM"])
    # Variants of ours (issue 38), each against these comparators and its faithful parent.
    ours: list[str] = Field(default_factory=lambda: ["evireform-robust", "evireform-hybrid", "cee-robust",
                                                     "evireform-fused"])
    ours_comparators: list[str] = Field(default_factory=lambda: ["proprag"])
    ours_metrics: list[str] = Field(default_factory=lambda: ["Recall@5", "Chain@5", "Recall@10", "nDCG@10"])


class OrchestrationParams(Section):
    """Prefect task runner: a local thread pool, or a Dask cluster via prefect-dask."""

    task_runner: Literal["thread", "dask"] = "thread"
    max_workers: int = Field(4, ge=1, le=512)
    dask_address: str | None = None
    dask_n_workers: int = Field(2, ge=1, le=512)
    # per-question retrieval tasks (flows/questions.py): retries of a task that raised
    question_retries: int = Field(1, ge=0, le=10)
    question_retry_delay_s: float = Field(2.0, ge=0.0, le=600.0)


class Params(Section):
    """The whole ``params.yaml``."""

    datasets: list[str] = Field(default_factory=lambda: list(DATASETS))
    retrieval_methods: list[str] = Field(default_factory=lambda: ["bm25", "dense"])
    llm_datasets: list[str] = Field(default_factory=lambda: ["demo"])
    reader_methods: list[str] = Field(default_factory=lambda: ["direct", "bm25", "dense"])
    # QA end task on benchmark samples (issue 40): reader over qa_methods' runs + direct
    qa_datasets: list[str] = Field(default_factory=list)
    qa_methods: list[str] = Field(default_factory=list)
    data: DataParams = DataParams()
    llm: LLMParams = LLMParams()
    embed: EmbedParams = EmbedParams()
    retrieval: RetrievalParams = RetrievalParams()
    evaluate: EvaluateParams = EvaluateParams()
    read: ReadParams = ReadParams()
    report: ReportParams = ReportParams()
    orchestration: OrchestrationParams = OrchestrationParams()
    evireform: EviReformParams = EviReformParams()
    evireform_datasets: list[str] = Field(default_factory=lambda: ["demo"])
    evireform_variants: list[str] = Field(default_factory=lambda: ["base", "full"])
    # tune_evireform runs on these (samples outside every reported one; each must be in
    # evireform_datasets, whose `full` run records the LLM answers the grids replay)
    tuning_datasets: list[str] = Field(default_factory=list)
    cee: CEEParams = CEEParams()
    cee_datasets: list[str] = Field(default_factory=lambda: ["demo"])
    cee_variants: list[str] = Field(
        default_factory=lambda: ["full", "no_coverage", "no_contrastive", "no_sequential"])
    # Baselines (issues 6-7) run on baseline_datasets; each family has its own section.
    baseline_datasets: list[str] = Field(default_factory=lambda: ["demo"])
    rerank: RerankParams = RerankParams()
    expansion: ExpansionParams = ExpansionParams()
    iterative: IterativeParams = IterativeParams()
    graph: GraphParams = GraphParams()
    medical_qa: MedicalQAParams = MedicalQAParams()
    # Ours (issue 38): run-level fusion (evichain.retrieval.fusion) on fusion_datasets, each
    # of which must run every one of fusion.runs
    fusion: FusionParams = FusionParams()
    fusion_datasets: list[str] = Field(default_factory=list)

    # Params blocks of methods registered after this module was written
    # (:func:`evichain.params_base.register_block`), validated with their own models.
    _method_blocks: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _registered_blocks(cls, data: Any, handler: Any) -> "Params":
        """Take the registered method blocks out of ``data`` and validate each with its model;
        every other key goes through the fields (unknown keys stay errors)."""
        if not isinstance(data, dict):
            return handler(data)
        blocks = {k: m for k, m in registered_blocks().items() if k not in cls.model_fields}
        found = {k: data[k] for k in data if k in blocks}
        rest = {k: v for k, v in data.items() if k not in found}
        validated: dict[str, Any] = {}
        errors: list[dict[str, Any]] = []
        for key, raw in found.items():
            try:
                validated[key] = blocks[key].model_validate({} if raw is None else raw)
            except ValidationError as exc:
                errors.extend(error_details(exc, (key,)))
        try:
            out = handler(rest)
        except ValidationError as exc:
            if not errors:
                raise
            raise ValidationError.from_exception_data(
                cls.__name__, [*error_details(exc, ()), *errors]) from None
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        out._method_blocks = validated
        return out

    def block(self, key: str) -> Any:
        """The params block at dotted ``key`` (``"evireform"``, ``"retrieval.bm25"``), or a
        registered method's block (its defaults when ``params.yaml`` has none)."""
        head, _, rest = key.partition(".")
        if head in type(self).model_fields:
            value: Any = getattr(self, head)
        elif head in self._method_blocks:
            value = self._method_blocks[head]
        elif head in registered_blocks():
            value = registered_blocks()[head]()
        else:
            raise KeyError(f"no params block {key!r}")
        for part in rest.split(".") if rest else ():
            value = getattr(value, part)
        return value

    @field_validator("cee_variants")
    @classmethod
    def _known_cee_variants(cls, v: list[str]) -> list[str]:
        from evichain.methods.cee.params import VARIANTS

        return _only_known(v, sorted(VARIANTS), "CEE variant")

    @field_validator("evireform_variants")
    @classmethod
    def _known_variants(cls, v: list[str]) -> list[str]:
        from evichain.methods.evireform.variants import OURS, VARIANTS

        return _only_known(v, sorted([*VARIANTS, *OURS]), "EviReform variant")

    @model_validator(mode="after")
    def _tuning_within_evireform(self) -> "Params":
        outside = [d for d in self.tuning_datasets if d not in self.evireform_datasets]
        if outside:
            raise ValueError(f"tuning_datasets {outside} must also be in evireform_datasets "
                             "(their `full` run records the LLM answers the grids replay)")
        return self

    @model_validator(mode="after")
    def _fusion_not_tuned_on_reports(self) -> "Params":
        tuned = [d for d in self.fusion_datasets if d in self.tuning_datasets]
        if tuned:
            raise ValueError(f"fusion_datasets {tuned} are tuning_datasets: the fusion weights "
                             "were chosen there (scripts/tune_fusion.py), report elsewhere")
        return self

    @field_validator("qa_methods")
    @classmethod
    def _ranking_methods_only(cls, v: list[str]) -> list[str]:
        if "direct" in v:
            raise ValueError("'direct' has its own stages (read_direct_qa, evaluate_direct_qa): "
                             "list only ranking methods here")
        return v

    @field_validator("datasets", "llm_datasets", "evireform_datasets", "cee_datasets",
                     "baseline_datasets", "tuning_datasets", "qa_datasets", "fusion_datasets")
    @classmethod
    def _known_datasets(cls, v: list[str]) -> list[str]:
        return _only_known(v, list(DATASETS), "dataset")


_only_known = only_known  # the old private name, still imported elsewhere


def load_params(path: str | Path = "params.yaml") -> Params:
    """Read and validate ``path``; raise :class:`ParamsError` naming the offending key."""
    path = Path(path)
    if not path.exists():
        raise ParamsError(f"{path}: file not found (run from the repository root)")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ParamsError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ParamsError(f"{path}: top level must be a mapping, got {type(raw).__name__}")
    return parse_params(raw, source=str(path))


def parse_params(raw: dict[str, Any], source: str = "params") -> Params:
    """Validate a params mapping; errors name ``source`` and the dotted key."""
    try:
        return Params.model_validate(raw)
    except ValidationError as exc:
        raise ParamsError(_format_errors(exc, source)) from None


def _format_errors(exc: ValidationError, source: str) -> str:
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "<root>"
        if err["type"] == "extra_forbidden":
            lines.append(f"{source}: unknown key '{key}' (check the spelling; see README 'Parameters')")
        else:
            got = err.get("input")
            shown = "" if isinstance(got, dict) else f" (got {got!r})"
            lines.append(f"{source}: {key}: {err['msg']}{shown}")
    return "\n".join(lines)
