"""Typed, validated pipeline parameters (``params.yaml``).

Every section is a pydantic model with ``extra="forbid"``: an unknown key or an out-of-range
value fails with :class:`ParamsError`, whose message names the file, the dotted key and what
is wrong, e.g. ``params.yaml: retrieval.bm25.k1: Input should be greater than 0 (got -1)``.

Core sections and the dataset / method lists are typed fields of :class:`Params`. The block of
a retrieval method (``evireform``, ``cee``, ``rerank``, ``expansion``, ``iterative``,
``graph``, or one registered later) lives with its method: its params module defines the model
and registers it (:func:`evichain.params_base.register_block`), and this module imports
nothing from :mod:`evichain.methods`, so a stage's import closure (its DVC deps, see
``scripts/dvc_deps.py``) holds only the params modules it imports itself: editing a reranker
default re-runs the rerank stages, not ``prepare``.

Method blocks are reached by name instead, with :func:`importlib.import_module`:

* the catalogue :mod:`evichain.methods.catalogue` (a literal) says which top-level keys are
  method blocks and which module defines each, so an unknown key is still an error naming it;
* :func:`parse_params` (every construction of :class:`Params`) loads the params module of every
  known block and validates each block present with its own model: a bad value in any block
  is a :class:`ParamsError` naming the file and dotted key, as for the core sections;
* ``params.evireform`` / ``params.block("graph.catrag")`` return the validated block (its
  defaults when ``params.yaml`` has none).

An import by name is invisible to the static import walk of ``scripts/dvc_deps.py``, on
purpose: validating another method's block cannot change a stage's outputs. A stage that
*reads* a block depends on that block's module, and the walk adds it: through the method's
own imports, or, where a stage reads ``params.<block>`` without importing its module, through
the catalogue (``scripts/dvc_deps.py``, "block reads").
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from evichain.data.params import DataParams, DemoParams, MedicalChunking, SampleParams
from evichain.embed.params import EmbedParams
from evichain.llm.params import FaultParams, LLMParams, LocalLLMParams
from evichain.params_base import (DATASETS, ParamsError, Section, error_details, only_known,
                                  registered_blocks, registered_checks)
from evichain.qa.medical_params import MedicalQAParams
from evichain.qa.params import ReadParams
from evichain.retrieval.params import BM25Params, DenseParams, FusionParams, RetrievalParams

__all__ = [
    "BM25Params", "DATASETS", "DataParams", "DemoParams", "DenseParams", "EmbedParams",
    "EvaluateParams", "FaultParams", "FusionParams", "LLMParams", "LocalLLMParams",
    "MedicalChunking", "MedicalQAParams", "OrchestrationParams", "Params", "ParamsError",
    "ReadParams", "ReportParams", "RetrievalParams", "SampleParams", "Section", "block_modules",
    "load_params", "parse_params",
]

CATALOGUE = "evichain.methods.catalogue"
"""The module (imported by name) whose literal ``BLOCK_MODULES`` maps each built-in method
block to its params module."""


def block_modules() -> dict[str, str]:
    """Built-in method block → its params module, from the catalogue (imported by name)."""
    return dict(importlib.import_module(CATALOGUE).BLOCK_MODULES)


def _block_model(key: str) -> type[Any] | None:
    """The registered model of method block ``key``, importing its params module (named by the
    catalogue) when it is not registered yet; None for a key that is no method block."""
    model = registered_blocks().get(key)
    if model is None:
        module = block_modules().get(key)
        if module is None:
            return None
        importlib.import_module(module)
        model = registered_blocks().get(key)
        if model is None:
            raise LookupError(f"{module} did not register params block {key!r} "
                              f"(see {CATALOGUE})")
    return model


def _load_block_modules() -> None:
    """Import the params module of every built-in block (each registers its block and checks)."""
    for module in block_modules().values():
        importlib.import_module(module)


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
    """The whole ``params.yaml``: typed core sections plus the method blocks (module docstring).

    A method block is read as an attribute (``params.evireform``, ``params.graph.catrag``) or
    with :meth:`block`; :meth:`model_dump` and ``==`` include every method block.
    """

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
    evireform_datasets: list[str] = Field(default_factory=lambda: ["demo"])
    # each an EviReform variant (checked by evichain.methods.evireform.params)
    evireform_variants: list[str] = Field(default_factory=lambda: ["base", "full"])
    # tune_evireform runs on these (samples outside every reported one; each must be in
    # evireform_datasets, whose `full` run records the LLM answers the grids replay)
    tuning_datasets: list[str] = Field(default_factory=list)
    cee_datasets: list[str] = Field(default_factory=lambda: ["demo"])
    # each a CEE variant (checked by evichain.methods.cee.params)
    cee_variants: list[str] = Field(
        default_factory=lambda: ["full", "no_coverage", "no_contrastive", "no_sequential"])
    # Baselines (issues 6-7) run on baseline_datasets; each family has its own block.
    baseline_datasets: list[str] = Field(default_factory=lambda: ["demo"])
    medical_qa: MedicalQAParams = MedicalQAParams()
    # Ours (issue 38): run-level fusion (evichain.retrieval.fusion) on fusion_datasets, each
    # of which must run every one of fusion.runs
    fusion: FusionParams = FusionParams()
    fusion_datasets: list[str] = Field(default_factory=list)

    # Method blocks, validated with their registered models: those given in params.yaml, and
    # the defaults of the others once read.
    _method_blocks: dict[str, Any] = PrivateAttr(default_factory=dict)
    # The method blocks params.yaml gave (model_dump(exclude_unset=True) keeps only these).
    _given_blocks: frozenset[str] = PrivateAttr(default_factory=frozenset)

    @model_validator(mode="wrap")
    @classmethod
    def _method_blocks_and_checks(cls, data: Any, handler: Any) -> "Params":
        """Take the method blocks out of ``data`` and validate each with its registered model;
        every other key goes through the fields (unknown keys stay errors). Then run the
        checks methods registered for core fields (``evireform_variants``)."""
        if not isinstance(data, dict):
            return handler(data)
        _load_block_modules()
        known = {*block_modules(), *registered_blocks()} - set(cls.model_fields)
        found = {k: data[k] for k in data if k in known}
        rest = {k: v for k, v in data.items() if k not in found}
        validated: dict[str, Any] = {}
        errors: list[dict[str, Any]] = []
        for key, raw in found.items():
            model = _block_model(key)
            try:
                validated[key] = model.model_validate({} if raw is None else raw)  # type: ignore[union-attr]
            except ValidationError as exc:
                errors.extend(error_details(exc, (key,)))
        try:
            out = handler(rest)
        except ValidationError as exc:
            if not errors:
                raise
            raise ValidationError.from_exception_data(
                cls.__name__, [*error_details(exc, ()), *errors]) from None
        for field, checks in registered_checks().items():
            for check in checks:
                value = getattr(out, field)
                try:
                    check(value)
                except ValueError as exc:
                    errors.append({"type": "value_error", "loc": (field,), "input": value,
                                   "ctx": {"error": exc}})
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        out._method_blocks = validated
        out._given_blocks = frozenset(validated)
        return out

    def block(self, key: str) -> Any:
        """The params block at dotted ``key`` (``"evireform"``, ``"retrieval.bm25"``,
        ``"graph.catrag"``): a core section, or a method block (its defaults when
        ``params.yaml`` has none)."""
        head, _, rest = key.partition(".")
        if head in type(self).model_fields:
            value: Any = getattr(self, head)
        elif head in self._method_blocks:
            value = self._method_blocks[head]
        else:
            model = _block_model(head) if head.isidentifier() else None
            if model is None:
                raise KeyError(f"no params block {key!r}")
            value = self._method_blocks.setdefault(head, model())
        for part in rest.split(".") if rest else ():
            value = getattr(value, part)
        return value

    def method_blocks(self) -> dict[str, Any]:
        """Every method block (built-in and registered) by key, sorted by key."""
        keys = {*block_modules(), *registered_blocks()} - set(type(self).model_fields)
        return {key: self.block(key) for key in sorted(keys)}

    def __getattr__(self, name: str) -> Any:
        # A method block as an attribute (params.rerank); pydantic's own lookup otherwise.
        if not name.startswith("_") and name in {*block_modules(), *registered_blocks()}:
            return self.block(name)
        return super().__getattr__(name)  # type: ignore[misc]

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        """The core sections and every method block (``exclude_unset``: only the blocks
        ``params.yaml`` gave); ``include`` / ``exclude`` name top-level keys for the blocks."""
        out = super().model_dump(**kwargs)
        include, exclude = kwargs.pop("include", None), kwargs.pop("exclude", None)
        for key, value in self.method_blocks().items():
            if kwargs.get("exclude_unset") and key not in self._given_blocks:
                continue
            if include is not None and key not in include:
                continue
            sub_exclude = exclude.get(key) if isinstance(exclude, Mapping) else None
            if exclude is not None and key in exclude and sub_exclude in (None, True, ...):
                continue
            out[key] = value.model_dump(exclude=sub_exclude, **kwargs)
        return out

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> "Params":
        """A copy; ``update`` may replace method blocks (validated models) as well as fields."""
        update = dict(update or {})
        blocks = {k: update.pop(k) for k in list(update) if k not in type(self).model_fields
                  and _block_model(k) is not None}
        out = super().model_copy(update=update, deep=deep)
        out._method_blocks = {**self._method_blocks, **blocks}
        out._given_blocks = self._given_blocks | frozenset(blocks)
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Params):
            return NotImplemented
        return type(self) is type(other) and self.model_dump() == other.model_dump()

    __hash__ = None  # type: ignore[assignment]

    def __repr_args__(self) -> Any:
        yield from super().__repr_args__()
        yield from self.method_blocks().items()

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
        return only_known(v, list(DATASETS), "dataset")


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
