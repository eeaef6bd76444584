"""Run-level score fusion as a method (``fused``; params block ``fused``; ours, issues 38 and 61).

A variant names a fusion: its runs (each the run name of a registered method and variant,
``evireform-robust`` = ``evireform`` variant ``robust``), one weight per run and a depth:

* ``evireform-fused``: the ``fusion`` block of ``params.yaml`` (EviReform robust ⊕ PropRAG),
  the settings of the DVC stage ``fuse``;
* ``seeds-fused``: the seed-fusion tuning record ``fused.seeds_record`` (EviReform robust ⊕
  CEE robust, weights (w, 1 − w)), the settings of the DVC stage ``fuse_seeds``.

:meth:`Fused.index` and :meth:`Fused.build` build every component through the registry
(:func:`~evichain.methods.base.get_method`, its own ``index`` and ``build`` over the same
context, so the LLM usage of every component is counted on the run's clients). Per question
every component retrieves, then :func:`evichain.retrieval.fusion.score_fusion` fuses their
rankings: f(q, p) = Σ_m w_m · s_m(q, p) / max_p' s_m(q, p'), top ``depth``. Fusion is per
question, so the ranking equals ``score_fusion`` of the components' own runs (the DVC stages'
path). The trace row carries each run's LLM tokens as ``fused_trace`` names them
(``<run>_prompt_tokens``, ``<run>_completion_tokens``), each run's other trace fields as
``<run>.<field>``, and ``status``: ``failed`` / ``partial`` when every / some run's row records a
failed LLM call (:func:`evichain.llm.failures.failed_questions`), else ``ok``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from evichain.llm.failures import failed_questions
from evichain.methods.base import (
    BuildContext,
    FunctionRetriever,
    Method,
    QuestionResult,
    Retriever,
    get_method,
    known_names,
    register,
)
from evichain.methods.fused.params import FusedParams
from evichain.metrics.cost import token_columns
from evichain.retrieval.fusion import (
    SEEDS_FUSED,
    fused_rows,
    fused_trace,
    record_fusion,
)
from evichain.retrieval.params import FusionParams
from evichain.retrieval.run import run_rows

if TYPE_CHECKING:
    from evichain.config import Params

EVIREFORM_FUSED = "evireform-fused"
"""The variant fused by the ``fusion`` block (EviReform robust ⊕ PropRAG)."""


@dataclass(frozen=True)
class Component:
    """One fused run: its name, the registered method and variant that make it, its weight."""

    run: str
    method: Method
    variant: str
    weight: float


@dataclass
class FusedResult(QuestionResult):
    """A fused question's :class:`QuestionResult` plus its question id and every component's
    own result (``parts``: run name → result), for :meth:`Fused.summary`."""

    question_id: str = ""
    parts: dict[str, QuestionResult] = field(default_factory=dict)


def resolve_run(run: str) -> tuple[Method, str]:
    """The registered method and variant whose :meth:`~Method.run_name` is ``run``.

    Only methods whose name occurs in ``run`` are looked at (their modules alone are imported);
    a fused method cannot be a component. A ValueError when no method, or more than one, names
    its run ``run``."""
    matches: list[tuple[Method, str]] = []
    for name in known_names():
        if name not in run:
            continue
        method = get_method(name)
        if isinstance(method, Fused):
            continue
        matches += [(method, v) for v in method.variants if method.run_name(v) == run]
    if len(matches) != 1:
        found = [m.label(v) for m, v in matches]
        raise ValueError(f"fusion run {run!r} must be the run of exactly one registered method "
                         f"and variant (e.g. evireform-robust, proprag, cee-robust); found {found}")
    return matches[0]


def components(fusion: FusionParams) -> list[Component]:
    """The fused runs of ``fusion``, each resolved to its method and variant (:func:`resolve_run`)."""
    weights = fusion.weight_of()
    return [Component(run, *resolve_run(run), weights[run]) for run in fusion.runs]


def component_trace(question_id: str, result: QuestionResult) -> pd.DataFrame:
    """One run's trace row of ``question_id`` as a one-row table (the flow's trace layout);
    pandas, the type :func:`~evichain.llm.failures.failed_questions` reads (a trace row may
    hold values of any type, which a pandas object column keeps as they are)."""
    return pd.DataFrame([{"question_id": question_id, **result.trace}])


def fused_trace_row(question_id: str, parts: Mapping[str, QuestionResult]) -> dict[str, Any]:
    """The fused trace row (module docstring): every run's tokens by
    :func:`~evichain.retrieval.fusion.fused_trace`, its other fields as ``<run>.<field>``, and
    ``status`` from the runs' failed LLM calls."""
    frames = {run: component_trace(question_id, result) for run, result in parts.items()}
    tokens = fused_trace(frames).drop("question_id").row(0, named=True)
    row: dict[str, Any] = {str(k): int(v) for k, v in tokens.items()}
    for run, frame in frames.items():
        skip = {"question_id", *token_columns(frame)}
        row.update({f"{run}.{k}": v for k, v in parts[run].trace.items() if k not in skip})
    failed = sum(failed_questions(frame) for frame in frames.values())
    row["status"] = "ok" if failed == 0 else ("failed" if failed == len(frames) else "partial")
    return row


def fuse_question(question_id: str, parts: Mapping[str, QuestionResult],
                  weights: Mapping[str, float], depth: int) -> FusedResult:
    """The fused result of one question from its runs' results: the rows of
    :func:`~evichain.retrieval.fusion.fused_rows` over the runs' rows, the trace of
    :func:`fused_trace_row`, every timing summed over the runs (``compute`` plus the fusion's
    own seconds, also kept as ``fusion``)."""
    start = time.perf_counter()
    rows = fused_rows({run: run_rows(result.rows) for run, result in parts.items()}, weights, depth)
    fusion_s = time.perf_counter() - start
    seconds: dict[str, float] = {}
    for result in parts.values():
        for key, value in result.seconds.items():
            seconds[key] = seconds.get(key, 0.0) + float(value)
    seconds["compute"] = seconds.get("compute", 0.0) + fusion_s
    seconds["fusion"] = fusion_s
    return FusedResult(rows, fused_trace_row(question_id, parts), seconds,
                       question_id=question_id, parts=dict(parts))


def one_blas_thread() -> contextlib.AbstractContextManager[Any]:
    """One BLAS thread per question task (the tasks already run in parallel threads)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


@register
class Fused(Method):
    """Run-level score fusion of registered methods (module docstring)."""

    name = "fused"
    Params = FusedParams
    params_key = "fused"
    variants = (EVIREFORM_FUSED, SEEDS_FUSED)
    default_variant = EVIREFORM_FUSED
    uses_llm = True

    def label(self, variant: str | None = None) -> str:
        """The variant itself (``evireform-fused``, ``seeds-fused``): the name the ``fuse`` and
        ``fuse_seeds`` stages give the same fused run."""
        return self.check_variant(variant)

    def fusion(self, params: Params, variant: str | None = None) -> FusionParams:
        """The fusion settings of ``variant``: the ``fusion`` block (``evireform-fused``), or
        the tuning record at ``fused.seeds_record`` (``seeds-fused``; a FileNotFoundError
        naming the param when it is absent)."""
        if self.check_variant(variant) == EVIREFORM_FUSED:
            fusion: FusionParams = params.fusion
            return fusion
        path = Path(self.params_of(params).seeds_record)
        if not path.is_file():
            raise FileNotFoundError(f"seeds-fused: tuning record {path} not found (fused.seeds_record, "
                                    "relative to the working directory; written by "
                                    "scripts/tune_seed_fusion.py)")
        return record_fusion(path, SEEDS_FUSED)

    def components(self, params: Params, variant: str | None = None) -> list[Component]:
        """The fused runs of ``variant``, each with its method, variant and weight."""
        return components(self.fusion(params, variant))

    def tables(self, params: Any, variant: str | None = None) -> tuple[str, ...]:
        """Every table a component reads (each once, in the components' order)."""
        names = [t for c in self.components(params, variant) for t in c.method.tables(params, c.variant)]
        return tuple(dict.fromkeys(names))

    def index(self, ctx: BuildContext, variant: str | None = None) -> dict[str, Any]:
        """Every component's index, by run name."""
        return {c.run: c.method.index(ctx, c.variant) for c in self.components(ctx.params, variant)}

    def build(self, ctx: BuildContext, variant: str | None = None, index: Any = None) -> FunctionRetriever:
        """Every component built through the registry over ``ctx`` (its index from ``index``,
        a result of :meth:`index`, when given); per question their results fused by
        :func:`fuse_question`. ``inner``: the components' retrievers by run name."""
        fusion = self.fusion(ctx.params, variant)
        parts = components(fusion)
        built = index if index is not None else self.index(ctx, variant)
        if not isinstance(built, Mapping) or set(built) != {c.run for c in parts}:
            raise ValueError(f"fused index must map the runs {fusion.runs} to their indexes "
                             f"(Fused.index), got {type(built).__name__}")
        retrievers: dict[str, Retriever] = {c.run: c.method.build(ctx, c.variant, built[c.run])
                                            for c in parts}
        weights, depth = fusion.weight_of(), fusion.depth

        def retrieve(question_id: str, question: str) -> QuestionResult:
            results = {run: r.retrieve(question_id, question) for run, r in retrievers.items()}
            return fuse_question(question_id, results, weights, depth)

        return FunctionRetriever(retrieve, retrievers)

    def compute_limits(self) -> contextlib.AbstractContextManager[Any]:
        """One BLAS thread per question task: the fused method runs every component in each
        task, and the tasks already run in parallel (EviReform's rule; the base contract gives
        this hook no variant, so the components' own hooks cannot be asked)."""
        return one_blas_thread()

    def summary(self, params: Params, variant: str | None, trace: pd.DataFrame,
                results: Sequence[QuestionResult], index: Any) -> dict[str, Any]:
        """The fusion settings, the fused statuses, and every component's own summary
        (:meth:`Method.summary` of its trace, results and index) under ``components``."""
        fusion = self.fusion(params, variant)
        fused = [r for r in results if isinstance(r, FusedResult)]
        if len(fused) != len(results):
            raise TypeError("Fused.summary needs the FusedResult of every question (Fused.build)")
        out: dict[str, Any] = {
            "fusion": {"runs": list(fusion.runs), "weights": list(fusion.weights), "depth": fusion.depth},
            "status": {str(k): int(v) for k, v in trace["status"].value_counts().items()}
            if "status" in trace else {},
            "components": {}}
        for c in components(fusion):
            parts = [r.parts[c.run] for r in fused]
            sub = pd.DataFrame([{"question_id": r.question_id, **p.trace} for r, p in zip(fused, parts)])
            out["components"][c.run] = c.method.summary(params, c.variant, sub, parts, index[c.run])
        return out
