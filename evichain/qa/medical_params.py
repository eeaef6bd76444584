"""Parameters of GraphRAG-Bench Medical answering and judging (``medical_qa`` in ``params.yaml``).

Answering follows EviReform Appendix C (Listing 2 over a method's top ``context_k`` = 5
passages); judging follows the GraphRAG-Bench generation evaluator (temperature 0, top-p 1,
seed 42, answer correctness = 0.75 x statement F1 + 0.25 x semantic similarity, inputs cut to
3,000 characters and the faithfulness context to 10,000 characters).
"""

from __future__ import annotations

from pydantic import Field, field_validator

from evichain.llm.params import LLMParams
from evichain.params_base import DATASETS, Section, UnitInterval, known_names


class MedicalQAParams(Section):
    """The ``medical_qa`` section (unknown keys are errors).

    * ``datasets`` / ``methods``: the DVC matrix of ``read_medical`` and ``evaluate_medical``
      (methods = any run table ``artifacts/<ds>/runs/<method>.parquet``).
    * ``context_k``: passages of the method's ranking given to the answer prompt (EviReform §4.2).
    * ``answer_max_tokens``: completion limit of the answer call (``null`` = ``llm.max_tokens``);
      summaries and creative answers are several hundred tokens long, so the default is larger
      than the short-answer reader's.
    * ``judge_model``: litellm model string of the judge; ``null`` = ``llm.model`` (the report
      names the model that judged). ``judge_api_base`` / ``judge_api_key_env``: endpoint of a
      judge that differs from the reader's (``null`` = ``llm.api_base`` / ``llm.api_key_env``).
    * ``judge_temperature`` / ``judge_top_p`` / ``judge_seed``: the benchmark evaluator's
      sampling (0.0 / 1.0 / 42). ``judge_max_tokens``: completion limit of judge calls.
    * ``correctness_weights``: (statement F-beta, semantic similarity) weights of answer
      correctness; ``correctness_beta``: the F-beta of the statement classification.
    * ``max_text_chars``: answers and references are cut to this many characters before a judge
      prompt; ``max_context_chars``: the faithfulness context (joined passages) likewise.
    * ``max_failure_rate``: a stage fails when more than this fraction of questions failed
      (failed answers in ``read_medical``; failed judgements in ``evaluate_medical``).
    """

    datasets: list[str] = Field(default_factory=lambda: ["medical_s"])
    methods: list[str] = Field(default_factory=lambda: ["bm25", "dense"])
    context_k: int = Field(5, ge=1, le=100)
    answer_max_tokens: int | None = Field(1024, ge=1, le=32768)
    judge_model: str | None = None
    judge_api_base: str | None = None
    judge_api_key_env: str | None = None
    judge_temperature: float = Field(0.0, ge=0.0, le=2.0)
    judge_top_p: float = Field(1.0, gt=0.0, le=1.0)
    judge_seed: int | None = 42
    judge_max_tokens: int = Field(1024, ge=1, le=32768)
    correctness_weights: tuple[float, float] = (0.75, 0.25)
    correctness_beta: float = Field(1.0, gt=0.0)
    max_text_chars: int = Field(3000, ge=100)
    max_context_chars: int = Field(10000, ge=100)
    max_failure_rate: UnitInterval = 0.2

    _known_datasets = known_names("datasets", DATASETS, "dataset")

    @field_validator("correctness_weights")
    @classmethod
    def _weights(cls, v: tuple[float, float]) -> tuple[float, float]:
        if min(v) < 0 or sum(v) <= 0:
            raise ValueError("must be two non-negative weights with a positive sum")
        return v

    def answer_llm(self, llm: LLMParams) -> LLMParams:
        """The reader's LLM settings for the answer call (``answer_max_tokens`` applied)."""
        if self.answer_max_tokens is None:
            return llm
        return llm.model_copy(update={"max_tokens": self.answer_max_tokens})

    def judge_llm(self, llm: LLMParams) -> LLMParams:
        """The judge's LLM settings: ``llm`` with the judge model, endpoint and sampling."""
        update: dict[str, object] = {
            "model": self.judge_model or llm.model, "temperature": self.judge_temperature,
            "top_p": self.judge_top_p, "seed": self.judge_seed, "max_tokens": self.judge_max_tokens}
        if self.judge_api_base is not None:
            update["api_base"] = self.judge_api_base
        if self.judge_api_key_env is not None:
            update["api_key_env"] = self.judge_api_key_env
        return llm.model_copy(update=update)
