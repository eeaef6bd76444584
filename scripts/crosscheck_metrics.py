"""Recompute every metrics JSON from the committed runs, answers and gold; then check the
report's tables against the recomputed values (issue 63, item 7).

Inputs are committed files only (no ``artifacts/``), written by ``stages/export_runs.py``
(formats: :mod:`evichain.report.runs_export`):

* ``reports/metrics/<ds>/<name>.json``: the pipeline's numbers, rounded to 6 decimals;
* ``reports/runs/<ds>/<m>.trec.gz`` and ``reports/runs/<ds>/qrels.txt``: rankings and gold
  passages of the evaluated questions;
* ``reports/answers/<ds>/<m>.jsonl`` and ``reports/answers/<ds>/gold.json``: the reader's answers
  and the gold answers of the evaluated questions.

Each metrics JSON is recomputed twice, independently:

1. **ir_measures** (its default provider), on the files read by ``ir_measures.read_trec_run`` /
   ``read_trec_qrels``: ``Recall@K`` = ``R@K``, ``Hit@K`` = ``Success@K``, ``MAP@10`` =
   ``AP@10`` (trec_eval ``map_cut``: divided by ``|G|``), ``nDCG@10`` = ``nDCG@10``.
   ir_measures has no all-gold measure, so ``Chain@K`` = ``1[R@K = 1]`` (every gold passage
   within the first ``K``), by its definition. A question of the qrels absent from the run
   scores 0. Answers have no ir_measures measure: ``EM``/``F1`` come from the library's
   :mod:`evichain.metrics.qa` applied to the committed answers and gold.
2. **plain Python**: the files parsed with ``gzip`` and ``str.split``, metrics by sets and loops
   (:func:`per_question`), answers by a character-loop reimplementation of EviReform C.4
   (:func:`c4_scores`; no regular expressions, no shared code).

A value matches when ``|recomputed − JSON| ≤ 5·10⁻⁷ + 10⁻¹²`` (half a unit of the JSON's sixth
decimal, plus float slack). Also compared: ``n_questions`` (the gold files' question count),
for answers ``question_filter``, ``n_failed`` (evaluated questions whose status is not ``ok``)
and ``reader_tokens_per_question`` (mean prompt + completion tokens over the answer file, two
decimals). A metrics JSON whose run or answer file is not committed (it was not on the machine
that exported) is listed as ``not on this machine``; judge-scored files (``medqa-*``) are listed
as not recomputable from runs.

Finally every percentage cell of the report's main table and retrieval decomposition table
(``reports/README.md``) is compared with ``round(100 · v, 2)``, ``v`` the recomputed value
rounded as the JSON is (6 decimals), or the JSON value where the run is not committed. Exits 1
on any mismatch. Usage:

    .venv/bin/python -m scripts.crosscheck_metrics [--out scripts/crosscheck_metrics.results.md]
"""

from __future__ import annotations

import gzip
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ir_measures
import typer
from ir_measures import AP, R, Success, nDCG

from evichain.metrics.qa import exact_match, f1
from evichain.report.runs_export import (
    QA_PREFIX,
    answers_file,
    gold_answers_file,
    qrels_file,
    read_answers,
    read_gold_answers,
    run_file,
)

JSON_DECIMALS = 6
"""stages/evaluate.py rounds every mean to this many decimals."""
TOLERANCE = 0.5 * 10 ** -JSON_DECIMALS + 1e-12
TABLE_DECIMALS = 2
"""The report prints percentages with this many decimals."""
TOKEN_DECIMALS = 2
"""stages/evaluate.py rounds ``reader_tokens_per_question`` to this many decimals."""
METRIC_KEY = re.compile(r"^(Recall|Chain|Hit|MAP|nDCG)@(\d+)$")
ANSWER_METRICS = ("EM", "F1")
IR_MEASURES = {"Recall": R, "Hit": Success, "MAP": AP, "nDCG": nDCG}
"""Our column prefix → its ir_measures measure (``Chain`` is derived from ``R``)."""
CHECKED_SECTIONS = ("## Main table", "## Retrieval decomposition")
NOT_HERE = "not on this machine"

app = typer.Typer(add_completion=False)


@dataclass
class Check:
    """The outcome for one metrics JSON: both recomputations' largest differences, the
    recomputed values (for the report cells) and every disagreement found."""

    dataset: str
    name: str
    n_questions: int
    status: str = "ok"
    diff_ir: float | None = None
    diff_plain: float | None = None
    values: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


# --- retrieval ----------------------------------------------------------------------------------


def metric_keys(stored: dict[str, Any]) -> list[str]:
    """The retrieval metrics a JSON reports (``Recall@K``, ``Chain@K``, ``Hit@K``, ``MAP@K``,
    ``nDCG@K``), sorted."""
    return sorted(k for k in stored if METRIC_KEY.match(k))


def ir_measures_means(run_path: Path, qrels_path: Path, keys: list[str]) -> tuple[dict[str, float], int]:
    """Means of ``keys`` over the qrels' questions by ir_measures (module docstring, item 1),
    and the number of those questions."""
    qrels = list(ir_measures.read_trec_qrels(str(qrels_path)))
    run = list(ir_measures.read_trec_run(str(run_path)))
    qids = sorted({q.query_id for q in qrels})
    wanted: dict[str, ir_measures.Measure] = {}
    for key in keys:
        prefix, k = METRIC_KEY.match(key).groups()  # type: ignore[union-attr]
        measure = (R if prefix == "Chain" else IR_MEASURES[prefix]) @ int(k)
        wanted[str(measure)] = measure
    per_q: dict[str, dict[str, float]] = {q: {} for q in qids}
    for result in ir_measures.iter_calc(list(wanted.values()), qrels, run):
        if result.query_id in per_q:
            per_q[result.query_id][str(result.measure)] = float(result.value)
    means: dict[str, float] = {}
    for key in keys:
        prefix, k = METRIC_KEY.match(key).groups()  # type: ignore[union-attr]
        name = str((R if prefix == "Chain" else IR_MEASURES[prefix]) @ int(k))
        values = [per_q[q].get(name, 0.0) for q in qids]
        if prefix == "Chain":
            values = [float(v == 1.0) for v in values]
        means[key] = sum(values) / len(values) if values else 0.0
    return means, len(qids)


def read_run_plain(path: Path) -> dict[str, list[str]]:
    """question id → passage ids in rank order, parsed with gzip and split."""
    ranked: dict[str, list[tuple[int, str]]] = {}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            qid, _, pid, rank, _, _ = line.split()
            ranked.setdefault(qid, []).append((int(rank), pid))
    return {q: [p for _, p in sorted(rows)] for q, rows in ranked.items()}


def read_qrels_plain(path: Path) -> dict[str, set[str]]:
    """question id → gold passage ids (relevance > 0)."""
    gold: dict[str, set[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        qid, _, pid, rel = line.split()
        if int(rel) > 0:
            gold.setdefault(qid, set()).add(pid)
    return gold


def per_question(ranked: list[str], gold: set[str], keys: list[str]) -> dict[str, float]:
    """Every metric of ``keys`` for one question, by its definition (sets and loops)."""
    out: dict[str, float] = {}
    for key in keys:
        prefix, k_text = METRIC_KEY.match(key).groups()  # type: ignore[union-attr]
        k = int(k_text)
        top = ranked[:k]
        hit = len(set(top) & gold)
        if prefix == "Recall":
            out[key] = hit / len(gold)
        elif prefix == "Chain":
            out[key] = float(gold <= set(top))
        elif prefix == "Hit":
            out[key] = float(hit > 0)
        elif prefix == "MAP":
            precisions = [sum(p in gold for p in top[: i + 1]) / (i + 1)
                          for i, p in enumerate(top) if p in gold]
            out[key] = sum(precisions) / len(gold)
        else:  # nDCG, binary gains
            dcg = sum(1 / math.log2(i + 2) for i, p in enumerate(top) if p in gold)
            idcg = sum(1 / math.log2(i + 2) for i in range(min(len(gold), k)))
            out[key] = dcg / idcg
    return out


def plain_means(run_path: Path, qrels_path: Path, keys: list[str]) -> dict[str, float]:
    """Means of ``keys`` over the qrels' questions, plain Python (module docstring, item 2)."""
    ranked, gold = read_run_plain(run_path), read_qrels_plain(qrels_path)
    rows = [per_question(ranked.get(q, []), g, keys) for q, g in sorted(gold.items())]
    return {k: sum(r[k] for r in rows) / len(rows) if rows else 0.0 for k in keys}


def check_retrieval(reports: Path, check: Check, stored: dict[str, Any]) -> None:
    """Recompute one retrieval JSON from its committed run and qrels into ``check``."""
    run_path, qrels_path = run_file(reports, check.dataset, check.name), qrels_file(reports, check.dataset)
    if not run_path.exists() or not qrels_path.exists():
        check.status = NOT_HERE
        return
    keys = metric_keys(stored)
    by_ir, n = ir_measures_means(run_path, qrels_path, keys)
    by_plain = plain_means(run_path, qrels_path, keys)
    _compare(check, stored, by_ir, by_plain)
    if n != check.n_questions:
        check.problems.append(f"n_questions: qrels {n}, JSON {check.n_questions}")


# --- answers ------------------------------------------------------------------------------------


ARTICLES = {"a", "an", "the"}
PUNCT = set("""!"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~""")
SPECIAL = {"yes", "no", "noanswer"}


def c4_tokens(text: str) -> list[str]:
    """C.4 normalization: lower-case, drop punctuation, drop articles, split on whitespace."""
    kept = "".join(ch for ch in str(text).lower() if ch not in PUNCT)
    return [w for w in kept.split() if w not in ARTICLES]


def c4_scores(pred: str, golds: list[str]) -> tuple[float, float]:
    """(EM, F1) of one prediction, max over gold aliases; yes/no/noanswer mismatches score 0."""
    best_em, best_f1 = 0.0, 0.0
    p = c4_tokens(pred)
    for gold in golds:
        g = c4_tokens(gold)
        best_em = max(best_em, float(p == g))
        if (" ".join(p) in SPECIAL or " ".join(g) in SPECIAL) and p != g:
            continue
        remaining = list(g)
        common = 0
        for w in p:
            if w in remaining:
                remaining.remove(w)
                common += 1
        if common:
            prec, rec = common / len(p), common / len(g)
            best_f1 = max(best_f1, 2 * prec * rec / (prec + rec))
    return best_em, best_f1


def answer_means(rows: list[dict[str, Any]], gold: dict[str, list[str]]) -> tuple[dict[str, float], ...]:
    """``(library, plain, counts)``: EM/F1 means over the gold questions by
    :mod:`evichain.metrics.qa` and by :func:`c4_scores` (a missing or not-``ok`` answer scores
    0), and ``n_failed``."""
    by_id = {str(r["question_id"]): r for r in rows}
    lib, plain, failed = [], [], 0
    for qid, golds in sorted(gold.items()):
        row = by_id.get(qid, {"prediction": None, "status": "missing"})
        if row["status"] != "ok" or not isinstance(row["prediction"], str):
            failed += row["status"] != "ok"
            lib.append((0.0, 0.0))
            plain.append((0.0, 0.0))
            continue
        lib.append((exact_match(row["prediction"], golds), f1(row["prediction"], golds)))
        plain.append(c4_scores(row["prediction"], golds))
    n = max(len(gold), 1)
    means = [{m: sum(s[i] for s in scores) / n for i, m in enumerate(ANSWER_METRICS)}
             for scores in (lib, plain)]
    return means[0], means[1], {"n_failed": float(failed)}


def check_answers(reports: Path, check: Check, stored: dict[str, Any]) -> None:
    """Recompute one ``qa-<m>.json`` from its committed answers and gold answers into ``check``."""
    method = check.name[len(QA_PREFIX):]
    path, gold_path = answers_file(reports, check.dataset, method), gold_answers_file(reports, check.dataset)
    if not path.exists() or not gold_path.exists():
        check.status = NOT_HERE
        return
    filter_name, gold = read_gold_answers(gold_path)
    rows = read_answers(path)
    by_lib, by_plain, counts = answer_means(rows, gold)
    _compare(check, stored, by_lib, by_plain)
    if len(gold) != check.n_questions:
        check.problems.append(f"n_questions: gold answers {len(gold)}, JSON {check.n_questions}")
    if filter_name != stored.get("question_filter"):
        check.problems.append(f"question_filter: gold {filter_name}, JSON {stored.get('question_filter')}")
    if "n_failed" in stored and int(counts["n_failed"]) != stored["n_failed"]:
        check.problems.append(f"n_failed: answers {int(counts['n_failed'])}, JSON {stored['n_failed']}")
    if "reader_tokens_per_question" in stored and rows and "prompt_tokens" in rows[0]:
        tokens = sum(r["prompt_tokens"] + r["completion_tokens"] for r in rows) / len(rows)
        if round(tokens, TOKEN_DECIMALS) != stored["reader_tokens_per_question"]:
            check.problems.append(f"reader_tokens_per_question: answers {tokens:.2f}, "
                                  f"JSON {stored['reader_tokens_per_question']}")


# --- one file, all files ------------------------------------------------------------------------


def _compare(check: Check, stored: dict[str, Any], first: dict[str, float], second: dict[str, float]) -> None:
    """Fill ``check`` with the two recomputations' largest differences from ``stored`` and a
    problem for every value off by more than :data:`TOLERANCE`."""
    check.values = dict(first)
    check.diff_ir = max((abs(first[k] - stored[k]) for k in first), default=0.0)
    check.diff_plain = max((abs(second[k] - stored[k]) for k in second), default=0.0)
    for label, values in (("ir_measures/library", first), ("plain", second)):
        for key, value in values.items():
            if abs(value - stored[key]) > TOLERANCE:
                check.problems.append(f"{key} ({label}): recomputed {value:.7f}, JSON {stored[key]}")


def check_file(reports: Path, path: Path) -> Check | None:
    """The check of one metrics JSON, or None when it reports no question."""
    stored = json.loads(path.read_text(encoding="utf-8"))
    n = int(stored.get("n_questions") or 0)
    if not n:
        return None
    check = Check(path.parent.name, path.stem, n)
    if path.stem.startswith(QA_PREFIX) and all(m in stored for m in ANSWER_METRICS):
        check_answers(reports, check, stored)
    elif metric_keys(stored):
        check_retrieval(reports, check, stored)
    else:
        check.status = "not recomputable from runs (judge-scored)"
    if check.problems:
        check.status = "MISMATCH"
    return check


def check_all(reports: Path) -> list[Check]:
    """:func:`check_file` of every ``reports/metrics/<ds>/<name>.json`` reporting questions."""
    checks = [check_file(reports, p) for p in sorted((reports / "metrics").glob("*/*.json"))]
    return [c for c in checks if c is not None]


# --- the report's tables ------------------------------------------------------------------------


def table_cells(line: str) -> list[str]:
    """Cells of one markdown table row: outer pipes and each cell's padding removed."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def check_report(readme: Path, metrics: Path, checks: list[Check]) -> tuple[int, int, list[str]]:
    """Compare every percentage cell of the :data:`CHECKED_SECTIONS` tables with the value
    behind it; ``(cells, cells checked against recomputed values, mismatches)``.

    Each section holds one ``### <dataset> (n questions)`` block per dataset with a ``| Method |
    <metric> | ...`` table; ``F1``/``EM`` come from ``qa-<method>.json``, the other columns from
    ``<method>.json``. The expected cell is ``round(100 · round(v, 6), 2)``: ``v`` recomputed
    from the committed files where they are, else the JSON value."""
    recomputed = {(c.dataset, c.name): c.values for c in checks if c.values}
    lines = readme.read_text(encoding="utf-8").splitlines()
    checked, from_runs, bad = 0, 0, []
    in_section, ds, header = False, "", []
    for line in lines:
        if line.startswith("## "):
            in_section = line.startswith(CHECKED_SECTIONS)
            continue
        if not in_section:
            continue
        if line.startswith("### "):
            ds, header = line[4:].split(" (")[0].strip(), []
            continue
        if not line.startswith("|") or line.startswith("| ---"):
            continue
        cells = table_cells(line)
        if cells[0] == "Method":
            header = cells
            continue
        for col, cell in zip(header[1:], cells[1:]):
            value = cell.replace("**", "").replace("<u>", "").replace("</u>", "").strip()
            if not (col in ANSWER_METRICS or METRIC_KEY.match(col)) or not value.replace(".", "").isdigit():
                continue
            name = f"{QA_PREFIX}{cells[0]}" if col in ANSWER_METRICS else cells[0]
            if col in recomputed.get((ds, name), {}):
                source, v = "recomputed", recomputed[(ds, name)][col]
                from_runs += 1
            else:
                source, v = "JSON", json.loads((metrics / ds / f"{name}.json").read_text())[col]
            checked += 1
            expected = round(100 * round(v, JSON_DECIMALS), TABLE_DECIMALS)
            if abs(float(value) - expected) > 0.5 * 10 ** -TABLE_DECIMALS + 1e-9:
                bad.append(f"{ds} {cells[0]} {col}: table {value}, {source} {100 * v:.4f}")
    return checked, from_runs, bad


def missing_per_question(metrics: Path, per_question_dir: Path) -> list[str]:
    """``<ds>/<method>`` of every metrics JSON with questions whose per-question table
    ``reports/eval/<ds>/<method>.parquet`` is absent (its cells cannot be re-derived or
    bootstrapped from this checkout)."""
    out = []
    for path in sorted(metrics.glob("*/*.json")):
        if json.loads(path.read_bytes()).get("n_questions") and not (
                per_question_dir / path.parent.name / f"{path.stem}.parquet").exists():
            out.append(f"{path.parent.name}/{path.stem}")
    return out


# --- the results file ---------------------------------------------------------------------------


HEADER = [
    "# Metrics cross-check: every metrics JSON recomputed from the committed runs and answers", "",
    "Generated by `.venv/bin/python -m scripts.crosscheck_metrics` from committed files only: "
    "`reports/runs/<ds>/<m>.trec.gz` + `qrels.txt`, `reports/answers/<ds>/<m>.jsonl` + `gold.json` "
    "(written by `stages/export_runs.py`). Column *ir_measures / library*: retrieval metrics by "
    "ir_measures (Chain@K = 1[R@K = 1]), EM/F1 by `evichain.metrics.qa`; column *plain*: an "
    "independent sets-and-loops / character-loop reimplementation. A value matches within "
    f"{TOLERANCE:.1e} (the JSON's 6-decimal rounding). `{NOT_HERE}`: the run or answers were not "
    "on the machine that exported them, so they are not committed and the JSON is not recomputed.",
    "",
    "| dataset | metrics file | questions | max abs diff, ir_measures / library | max abs diff, plain "
    "| result |",
    "|---|---|---:|---:|---:|---|",
]


def _diff(value: float | None) -> str:
    return "" if value is None else f"{value:.2e}"


def results_text(checks: list[Check], report: tuple[int, int, list[str]], absent: list[str]) -> str:
    """The results file: one row per metrics JSON, the summary, the report cells' check."""
    lines = list(HEADER)
    for c in checks:
        lines.append(f"| {c.dataset} | {c.name} | {c.n_questions} | {_diff(c.diff_ir)} | "
                     f"{_diff(c.diff_plain)} | {c.status} |")
    done = [c for c in checks if c.diff_ir is not None]
    wrong = [c for c in checks if c.problems]
    here_not = [c for c in checks if c.status == NOT_HERE]
    other = [c for c in checks if c.diff_ir is None and c.status != NOT_HERE]
    lines += ["", f"Metrics files recomputed from committed files: {len(done)}, with a mismatch: "
              f"{len(wrong)}; {NOT_HERE}: {len(here_not)}; not recomputable from runs: {len(other)}."]
    lines += [f"- {c.dataset}/{c.name}: {p}" for c in wrong for p in c.problems]
    for ds in sorted({c.dataset for c in here_not}):
        names = [c.name for c in here_not if c.dataset == ds]
        lines.append(f"- {NOT_HERE}, {ds} ({len(names)}): {', '.join(names)}")
    checked, from_runs, bad = report
    lines += ["", f"Report tables (main table, retrieval decomposition): {checked} percentage cells "
              f"checked, {from_runs} against values recomputed from committed files, "
              f"{checked - from_runs} against the metrics JSON only; {len(bad)} mismatches.",
              *[f"- {b}" for b in bad]]
    lines += ["", f"Metrics JSONs without a per-question table in reports/eval: {len(absent)}"
              + (f" ({', '.join(absent)})" if absent else "") + "."]
    return "\n".join(lines) + "\n"


@app.command()
def main(out: Path = typer.Option(Path("scripts/crosscheck_metrics.results.md"), help="results file"),
         reports: Path = typer.Option(Path("reports"), help="the reports folder")) -> None:
    """Recompute, compare, write the results file; exit 1 on any mismatch."""
    checks = check_all(reports)
    report = check_report(reports / "README.md", reports / "metrics", checks)
    absent = missing_per_question(reports / "metrics", reports / "eval")
    text = results_text(checks, report, absent)
    out.write_text(text, encoding="utf-8")
    print(text[text.index("Metrics files recomputed"):], end="")
    if any(c.problems for c in checks) or report[2]:
        raise typer.Exit(code=1)


if __name__ == "__main__":
    app()
