"""Params of the data layer (``data`` block): source files, the demo slice, Medical chunking
and question samples; composed by :mod:`evichain.config`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from evichain.params_base import SAMPLE_DATASETS, Section, only_known


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
            "2wiki_tune_s": SampleParams(source="2wiki", n_questions=38, offset=100),
            "musique_llm": SampleParams(source="musique", n_questions=100)}


class DataParams(Section):
    """Where the benchmark source files are and how special datasets are built."""

    source_dir: str = "data"
    demo: DemoParams = DemoParams()
    medical: MedicalChunking = MedicalChunking()
    samples: dict[str, SampleParams] = Field(default_factory=_default_samples)

    @field_validator("samples")
    @classmethod
    def _sample_names(cls, v: dict[str, SampleParams]) -> dict[str, SampleParams]:
        only_known(list(v), list(SAMPLE_DATASETS), "sample dataset")
        return v

    def source_of(self, dataset: str) -> str:
        """The benchmark whose questions ``dataset`` holds: ``demo`` → its source (2wiki), a
        sample → its ``source``, a full benchmark → itself."""
        if dataset == "demo":
            return self.demo.source
        spec = self.samples.get(dataset)
        return spec.source if spec is not None else dataset
