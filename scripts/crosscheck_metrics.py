"""Recompute every metrics JSON from the run/answer files with plain Python and compare; then
check every cell of the report's main table against the metrics JSON.

Independent of ir-measures/pytrec_eval: sets and loops only. For every
``reports/metrics/<ds>/<method>.json`` with questions, it reads ``artifacts/<ds>/runs/<method>.parquet``
and ``questions.parquet``, applies the same question filter (gold-reliable on 2Wiki/demo) and
reports the largest absolute difference per file. Files whose run is not on this machine keep
the row an earlier run recorded, if their metrics JSON has the same md5 (marked ``earlier``).
Answer metrics (``qa-<m>.json``) are recomputed from ``artifacts/<ds>/qa/<m>.parquet`` with a
character-loop reimplementation of EviReform C.4 (no regular expressions, no shared code).
Finally every percentage cell of the main table in ``reports/README.md`` is compared with
100 × the JSON value (to its two printed decimals). Usage:

    .venv/bin/python -m scripts.crosscheck_metrics [--out scripts/crosscheck_metrics.results.md]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from pathlib import Path

import pandas as pd

KS = (1, 2, 5, 10, 20)


def per_question(ranked: list[str], gold: set[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in KS:
        top = set(ranked[:k])
        hit = len(top & gold)
        out[f"Recall@{k}"] = hit / len(gold)
        out[f"Chain@{k}"] = float(gold <= top)
        out[f"Hit@{k}"] = float(hit > 0)
    precisions = [sum(p in gold for p in ranked[: i + 1]) / (i + 1)
                  for i, p in enumerate(ranked[:10]) if p in gold]
    out["MAP@10"] = sum(precisions) / len(gold)
    dcg = sum(1 / math.log2(i + 2) for i, p in enumerate(ranked[:10]) if p in gold)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(len(gold), 10)))
    out["nDCG@10"] = dcg / idcg
    return out


def check(ds: str, method: str, stored: dict) -> float:
    art = Path("artifacts") / ds
    questions = pd.read_parquet(art / "questions.parquet")
    if stored.get("question_filter") == "gold_reliable":
        questions = questions[questions["gold_reliable"]]
    run = pd.read_parquet(art / "runs" / f"{method}.parquet").sort_values(["question_id", "rank"])
    ranked = {q: list(g["passage_id"]) for q, g in run.groupby("question_id")}
    rows = [per_question(ranked.get(q, []), set(g)) for q, g in
            zip(questions["question_id"], questions["gold_passage_ids"]) if len(g)]
    means = pd.DataFrame(rows).mean()
    return max(abs(means[m] - stored[m]) for m in means.index if m in stored)


ARTICLES = {"a", "an", "the"}
PUNCT = set("""!"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~""")


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
        special = {"yes", "no", "noanswer"}
        if (" ".join(p) in special or " ".join(g) in special) and p != g:
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


def check_qa(ds: str, method: str, stored: dict) -> float:
    art = Path("artifacts") / ds
    questions = pd.read_parquet(art / "questions.parquet")
    if stored.get("question_filter") == "gold_reliable":
        questions = questions[questions["gold_reliable"]]
    answers = pd.read_parquet(art / "qa" / f"{method}.parquet").set_index("question_id")
    scores = []
    for qid, golds in zip(questions["question_id"], questions["answers"]):
        golds = [str(g) for g in golds]
        if not golds:
            continue
        ok = qid in answers.index and answers.at[qid, "status"] == "ok"
        scores.append(c4_scores(answers.at[qid, "prediction"], golds) if ok else (0.0, 0.0))
    em = sum(s[0] for s in scores) / len(scores)
    f1 = sum(s[1] for s in scores) / len(scores)
    return max(abs(em - stored["EM"]), abs(f1 - stored["F1"]))


def table_cells(line: str) -> list[str]:
    """Cells of one markdown table row: outer pipes and each cell's padding removed."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def check_report(readme: Path, root: Path) -> tuple[int, list[str]]:
    """Compare the main table's percentage cells with the metrics JSON; (cells, mismatches).

    The main table is one ``### <dataset> (n questions)`` block per dataset, each a
    ``| Method | Recall@5 | Recall@10 | F1 | EM |`` table."""
    lines = readme.read_text().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("## Main table"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    keys = {"Recall@5": "Recall@5", "Recall@10": "Recall@10", "F1": "F1", "EM": "EM"}
    checked, bad, ds, header = 0, [], "", []
    for line in lines[start + 1:end]:
        if line.startswith("### "):
            ds, header = line[4:].split(" (")[0].strip(), []
            continue
        if not line.startswith("|") or line.startswith("| ---"):
            continue
        cells = table_cells(line)
        if cells[0] == "Method":
            header = cells
            continue
        method = cells[0]
        for col, cell in zip(header[1:], cells[1:]):
            value = cell.replace("**", "").replace("<u>", "").replace("</u>", "").strip()
            if col not in keys or not value.replace(".", "").isdigit():
                continue
            name = f"qa-{method}" if col in ("F1", "EM") else method
            stored = json.loads((root / ds / f"{name}.json").read_text())[keys[col]]
            checked += 1
            if abs(float(value) - round(100 * stored, 2)) > 0.005 + 1e-9:
                bad.append(f"{ds} {method} {col}: table {value}, JSON {100 * stored:.4f}")
    return checked, bad


HEADER = ["# Metrics cross-check (plain Python vs the pipeline's ir-measures metrics)", "",
          "Rows marked `earlier` were checked by an earlier run of this script on a machine that had "
          "their run files; they are kept only while the metrics JSON is byte-identical (same md5).", "",
          "| dataset | method | questions | max abs difference | metrics JSON md5 | checked |",
          "|---|---|---:|---:|---|---|"]


def json_md5(raw: bytes) -> str:
    """md5 of a metrics JSON's bytes: ties a recorded check to the exact file it checked."""
    return hashlib.md5(raw).hexdigest()


def earlier_rows(previous: str) -> dict[tuple[str, str], tuple[str, str, str]]:
    """Rows of a previous results file with an md5 column: (ds, method) -> (questions, diff, md5)."""
    rows: dict[tuple[str, str], tuple[str, str, str]] = {}
    for line in previous.splitlines():
        cells = table_cells(line)
        if len(cells) == 6 and len(cells[4]) == 32 and all(c in "0123456789abcdef" for c in cells[4]):
            rows[(cells[0], cells[1])] = (cells[2], cells[3], cells[4])
    return rows


def check_file(path: Path, stored: dict) -> float | None:
    """Max abs difference for one metrics JSON, or None when its run/answer file is not here."""
    ds, method = path.parent.name, path.stem
    if method.startswith("qa-"):
        if not (Path("artifacts") / ds / "qa" / f"{method[3:]}.parquet").exists():
            return None
        return check_qa(ds, method[3:], stored)
    if not (Path("artifacts") / ds / "runs" / f"{method}.parquet").exists():
        return None
    return check(ds, method, stored)


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="scripts/crosscheck_metrics.results.md")
    args = parser.parse_args()
    out = Path(args.out)
    before = earlier_rows(out.read_text()) if out.exists() else {}
    lines = list(HEADER)
    for path in sorted(Path("reports/metrics").glob("*/*.json")):
        raw = path.read_bytes()
        stored = json.loads(raw)
        if not stored.get("n_questions"):
            continue
        ds, method, md5 = path.parent.name, path.stem, json_md5(raw)
        diff = check_file(path, stored)
        if diff is not None:
            lines.append(f"| {ds} | {method} | {stored['n_questions']} | {diff:.2e} | {md5} | this run |")
            print(lines[-1])
        elif (ds, method) in before and before[(ds, method)][2] == md5:
            questions, old_diff, _ = before[(ds, method)]
            lines.append(f"| {ds} | {method} | {questions} | {old_diff} | {md5} | earlier |")
    checked, bad = check_report(Path("reports/README.md"), Path("reports/metrics"))
    lines += ["", f"Report main table: {checked} percentage cells checked against the metrics JSON, "
              f"{len(bad)} mismatches.", *[f"- {b}" for b in bad]]
    print(lines[-1 - len(bad)])
    absent = missing_per_question(Path("reports/metrics"), Path("reports/eval"))
    lines += ["", f"Metrics JSONs without a per-question table in reports/eval: {len(absent)}"
              + (f" ({', '.join(absent)})" if absent else "") + "."]
    print(lines[-1])
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
