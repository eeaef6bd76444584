"""DVC stages of the LLM retrieval methods: ``python -m stages.retrieve_method --dataset D
--method M [--variant V]``, one entry point for every family.

=============  ======================================  ==========================================
family         ``--method`` (``--variant``)             DVC stage, outputs under artifacts/D/
=============  ======================================  ==========================================
evireform      ``evireform`` (a variant, default full)  ``retrieve_evireform@D-V``:
                                                        ``runs|traces/evireform-V.parquet``,
                                                        ``usage/retrieve_evireform-V.json``
cee            ``cee`` (a variant, default full)        ``retrieve_cee@D-V``: ``cee-V``,
                                                        ``usage/retrieve_cee-V.json``
graph          ``hipporag2``, ``catrag``, ``proprag``   ``retrieve_graph@D-M``: ``M``,
                                                        ``usage/retrieve-M.json``
expansion      ``hyde``, ``query2doc``, ``lamer``       ``retrieve_expansion@D-M``: ``M``,
                                                        ``usage/retrieve-M.json``
iterative      ``ircot``, ``self_ask``, ``s2g_rag``,    ``retrieve_iterative@D-M`` (GeAR:
               ``gear``                                 ``retrieve_iterative_graph@D-M``): ``M``,
                                                        ``evidence/M.parquet``,
                                                        ``usage/retrieve-M.json``
rerank         ``listwise``, ``cross_encoder``          ``retrieve_rerank@D-M``: ``rerank-M``,
                                                        ``usage/retrieve-rerank-M.json``
=============  ======================================  ==========================================

Every method is built from the registry (:meth:`evichain.methods.base.Method.build`) and run
by the one per-question flow, :func:`flows.method.run_method`; the method's ``family`` picks the
names its outputs had under the per-family stages (:func:`stage_names`). This module writes what
the flow returns: the run (question_id, rank, passage_id, score), the trace (one row per
question), the iterative methods' evidence (question_id, position, passage_id, title, text:
their own context for ``stages.read --evidence``) and the usage summary (the method's counts,
latency excluding LLM calls, LLM calls / cache hits), then fails above
``llm.max_failure_rate`` (:func:`stages._common.write_method_outputs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from stages._common import run_stage, write_method_outputs

if TYPE_CHECKING:
    from evichain.methods.base import Method

app = typer.Typer(add_completion=False)

VARIANT_FAMILIES: frozenset[str] = frozenset({"evireform", "cee"})
"""Families whose one method has named variants (``--variant``, default ``full``)."""

LINE_KEYS: dict[str, tuple[str, ...]] = {
    "evireform": ("questions", "llm_calls", "selection_fallbacks", "residual_fallbacks",
                  "compute_p50_ms"),
    "cee": ("questions", "mean_pool_size", "llm_calls", "cache_hits", "compute_p50_ms",
            "facet_source", "passages_with_facets", "bridge_added"),
    "graph": ("questions", "llm_calls", "fallbacks", "compute_p50_ms"),
    "expansion": ("questions", "status", "fallbacks", "generations_failed", "llm_calls"),
    "iterative": ("questions", "stop_reasons", "llm_failures", "llm_calls"),
    "iterative_graph": ("questions", "stop_reasons", "llm_failures", "llm_calls"),
    "rerank": ("questions", "status", "fallbacks", "pool_source", "llm_calls"),
    "registered": ("questions", "llm_calls", "compute_p50_ms"),
}
"""Summary values each family prints on its ``done`` line (see :func:`line_value`)."""

_PATHS = {"llm_calls": ("llm_usage", "calls"), "cache_hits": ("llm_usage", "cache_hits"),
          "compute_p50_ms": ("latency_compute", "p50_ms"), "facet_source": ("facets", "source"),
          "passages_with_facets": ("facets", "passages_with_facets")}


@dataclass(frozen=True)
class StageNames:
    """The names one (dataset, method, variant) writes under and reports as."""

    family: str
    variant: str  # the usage file's ``variant``: the variant, or the method for the others
    run: str  # runs/<run>.parquet, traces/<run>.parquet (evidence/<run>.parquet)
    usage: str  # usage/<usage>.json
    flow_stage: str  # the LLM client's stage label
    label: str  # the DVC stage (run_stage's label)


def stage_names(dataset: str, method: str, variant: str | None = None) -> StageNames:
    """Names of ``method`` (``variant``) on ``dataset``, as the per-family stages had them;
    a ValueError for an unknown method or a variant given to a method without variants."""
    from evichain.methods.base import UnknownMethodError, get_method

    try:
        chosen = get_method(method)
    except UnknownMethodError as exc:
        raise ValueError(f"unknown --method {method!r}: {exc}") from None
    family = chosen.family
    if family == "registered":
        return registered_names(dataset, chosen, variant)
    if family in VARIANT_FAMILIES:
        v = variant or "full"
        return StageNames(family, v, f"{method}-{v}", f"retrieve_{method}-{v}",
                          f"retrieve_{method}-{v}", f"retrieve_{method}@{dataset}-{v}")
    if variant is not None and variant != method:
        raise ValueError(f"--method {method} has no variants (got --variant {variant!r})")
    if family == "rerank":
        run = chosen.run_name()
        return StageNames(family, method, run, f"retrieve-{run}", f"retrieve_rerank-{method}",
                          f"retrieve_rerank@{dataset}-{method}")
    label = f"retrieve_{family}@{dataset}-{method}"
    flow_stage = f"retrieve_expansion-{method}" if family == "expansion" else f"retrieve-{method}"
    return StageNames(family, method, method, f"retrieve-{method}", flow_stage, label)


def registered_names(dataset: str, chosen: Method, variant: str | None) -> StageNames:
    """Names of a method of family ``registered`` (a plug-in, or ``hybrid``):
    ``runs/M[-V].parquet``, ``usage/retrieve-M[-V].json``, stage ``retrieve_method@D-M[-V]``."""
    v = chosen.check_variant(variant)
    run = chosen.run_name(variant)
    return StageNames("registered", v, run, f"retrieve-{run}", f"retrieve-{run}",
                      f"retrieve_method@{dataset}-{run}")


def line_value(summary: dict[str, Any], key: str) -> tuple[bool, Any]:
    """(present, value) of ``key`` in a usage summary: LLM counts default to 0, other missing
    values are left off the line."""
    path = _PATHS.get(key, (key,))
    value: Any = summary
    for part in path:
        if not isinstance(value, dict) or part not in value:
            llm_count = path[0] == "llm_usage" and isinstance(value, dict)
            return (True, 0) if llm_count else (False, None)
        value = value[part]
    return True, value


def retrieve(dataset: str, method: str, variant: str | None, params_file: Path) -> None:
    """Run ``method`` on ``dataset`` and write its outputs (module docstring)."""
    try:
        names = stage_names(dataset, method, variant)
    except ValueError as exc:
        error = exc
        run_stage(f"retrieve_method@{dataset}-{method}", lambda: _raise(error))
        return

    def body() -> dict[str, object]:
        from evichain.config import load_params
        from evichain.io import write_parquet
        from evichain.paths import DatasetPaths
        from flows.method import run_method

        params = load_params(params_file)
        paths = DatasetPaths(dataset)
        flow_variant = None if names.variant == method else names.variant  # no variants: the method
        out = run_method(paths, method, flow_variant, params, stage=names.flow_stage)
        if out.evidence is not None:
            evidence = out.evidence.sort(["question_id", "position"], maintain_order=True)
            write_parquet(evidence, paths.evidence(names.run))
        # Written first: write_method_outputs fails the stage above llm.max_failure_rate.
        summary = write_method_outputs(dataset, names.run, names.variant, names.usage, out,
                                       params.llm.max_failure_rate)
        if names.family == "graph":  # its index statistics are committed (Tables C.8-C.9)
            from evichain.paths import ReportPaths
            from evichain.report.index_stats import write_index_stats

            write_index_stats({"dataset": dataset, "method": method, **summary["index"]},
                              ReportPaths().index_stats, dataset, method)
        line: dict[str, object] = {"dataset": dataset, "method": names.run}
        for key in LINE_KEYS[names.family]:
            present, value = line_value(summary, key)
            if present:
                line[key] = value
        return line

    run_stage(names.label, body)


def _raise(exc: Exception) -> None:
    raise exc


@app.command()
def main(dataset: str = typer.Option(...), method: str = typer.Option(...),
         variant: str | None = typer.Option(None, help="evireform / cee variant (default full)"),
         params_file: Path = typer.Option(Path("params.yaml"), "--params")) -> None:
    retrieve(dataset, method, variant, params_file)


if __name__ == "__main__":
    app()
