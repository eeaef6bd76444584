"""The GraphRAG-Bench Medical section of the main report (EviReform Table B.3 shape).

Input: the ``medqa-<method>`` files of the report's one read of ``reports/metrics/<dataset>/``
(:func:`evichain.report.main_report.read_metric_files`), written by the ``evaluate_medical``
stage. One table per dataset: rows = methods; columns = the nine
per-type metrics, ACC, the number of questions per type, and the model that judged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from evichain.qa.medical_eval import flat_metrics
from evichain.qa.medical_metrics import METRICS_BY_TYPE, QUESTION_TYPES
from evichain.report.tables import labelled_frame, render_markdown

PREFIX = "medqa-"
_TYPE_ABBR = {"Fact Retrieval": "FR", "Complex Reasoning": "CR", "Contextual Summarize": "CS",
              "Creative Generation": "CG"}
_METRIC_NAME = {"correctness": "Corr", "rouge_l": "ROUGE-L", "coverage": "Cov",
                "faithfulness": "Faith"}


def medical_metrics(raw: Mapping[str, Mapping[str, Mapping[str, Any]]]
                    ) -> dict[str, dict[str, Mapping[str, Any]]]:
    """dataset → method → medqa metrics JSON, from ``raw`` (dataset → file stem → JSON): the
    ``medqa-<method>`` stems; datasets without any are left out."""
    out: dict[str, dict[str, Mapping[str, Any]]] = {}
    for dataset, files in raw.items():
        found = {stem[len(PREFIX):]: data for stem, data in sorted(files.items())
                 if stem.startswith(PREFIX)}
        if found:
            out[dataset] = found
    return out


def medical_table(methods: Mapping[str, Mapping[str, Any]]) -> pl.DataFrame:
    """methods × (nine metrics, ACC, n per type, judge) for one dataset, the methods in a first
    ``method`` column (:func:`~evichain.report.tables.labelled_frame`); missing → N/E."""
    columns = [f"{_TYPE_ABBR[t]} {_METRIC_NAME[m]}" for t in QUESTION_TYPES for m in METRICS_BY_TYPE[t]]
    rows = {}
    for method, summary in sorted(methods.items()):
        flat = flat_metrics(summary)
        values = [flat[f"{t} {m}"] for t in QUESTION_TYPES for m in METRICS_BY_TYPE[t]]
        row: dict[str, Any] = {c: ("N/E" if v is None else v) for c, v in zip(columns, values, strict=True)}
        row["ACC"] = "N/E" if summary.get("ACC") is None else summary["ACC"]
        per_type = summary.get("per_type", {})
        row["n (FR/CR/CS/CG)"] = "/".join(str(per_type.get(t, {}).get("n", 0)) for t in QUESTION_TYPES)
        row["judge"] = f"`{summary.get('judge_model', '?')}`"
        rows[method] = row
    return labelled_frame(rows)


def _notes(methods: Mapping[str, Mapping[str, Any]]) -> list[str]:
    notes = []
    for method, s in sorted(methods.items()):
        counts = [f"{s.get(k, 0)} {label}" for k, label in (
            ("answer_failed", "failed answers (scored 0)"), ("judge_failed", "failed judgements (excluded)"),
            ("idk_answers", "\"I don't know\" answers"), ("parse_repairs", "repaired judge verdicts"))
            if s.get(k)]
        if counts:
            notes.append(f"- `{method}`: " + ", ".join(counts) + ".")
    return notes


def medical_section(data: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """Markdown section for every dataset of ``data`` (dataset → method → medqa metrics JSON,
    :func:`medical_metrics`); "" when there are none."""
    if not data:
        return ""
    parts = ["## GraphRAG-Bench Medical (EviReform Table B.3 shape)", "",
             "Answers: EviReform Listing 2 over each method's top passages; metrics: the "
             "GraphRAG-Bench generation evaluator per question type (FR = Fact Retrieval, "
             "CR = Complex Reasoning, CS = Contextual Summarize, CG = Creative Generation). "
             "Corr = answer correctness (0.75 × statement F1 judged by the LLM + 0.25 × "
             "embedding similarity), ROUGE-L = LCS F-measure, Cov = share of reference facts "
             "covered (LLM judge), Faith = share of answer statements supported by the retrieved "
             "passages (LLM judge), ACC = unweighted mean of the four types' Corr. The `judge` "
             "column names the model that judged.", ""]
    for dataset, methods in sorted(data.items()):
        first = next(iter(methods.values()))
        parts += [f"### {dataset}", "",
                  f"Reader `{first.get('reader_model', '?')}`; similarity encoder "
                  f"`{first.get('similarity_model', '?')}`.", "",
                  render_markdown(medical_table(methods))]
        notes = _notes(methods)
        if notes:
            parts += [*notes, ""]
    return "\n".join(parts)
