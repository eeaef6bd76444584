"""The last lines of ``make all`` / ``make demo`` / ``make repro``: where the results are, a
three-line summary of one dataset's metrics, and whether the run left ``git status`` clean.

    python -m scripts.results_summary [--dataset demo]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHOWN = (("evireform-full", "EviReform full"), ("bm25", "BM25"), ("dense", "dense"))


def metric_line(dataset: str, run: str, label: str, root: Path = ROOT) -> str:
    """``<label>: R@5 xx.xx, Chain@5 xx.xx (n = k)`` from ``reports/metrics/<dataset>/<run>.json``."""
    path = root / "reports" / "metrics" / dataset / f"{run}.json"
    if not path.is_file():
        return f"{label}: no metrics yet ({path.relative_to(root)} missing)"
    found = json.loads(path.read_text(encoding="utf-8"))
    return (f"{label}: R@5 {100 * found['Recall@5']:.2f}, Chain@5 {100 * found['Chain@5']:.2f}, "
            f"R@10 {100 * found['Recall@10']:.2f} (n = {found['n_questions']} questions)")


def git_changes(root: Path = ROOT) -> list[str]:
    """``git status --porcelain`` lines (tracked changes and untracked files)."""
    out = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True,
                         text=True, check=False).stdout
    return [line for line in out.splitlines() if line.strip()]


def summary(dataset: str, root: Path = ROOT) -> str:
    """The text printed at the end of a make target."""
    places = (("reports/README.md", "every dataset and method (generated)"),
              (f"reports/datasets/{dataset}.md", "this dataset's page; figures in reports/figures/"),
              (f"reports/metrics/{dataset}/*.json", "one metrics file per method"))
    width = max(len(path) for path, _ in places) + 2
    lines = ["", "Results:", *(f"  {path.ljust(width)}{what}" for path, what in places),
             f"Summary ({dataset}, retrieval, % of gold passages):"]
    lines += [f"  {metric_line(dataset, run, label, root)}" for run, label in SHOWN]
    changes = git_changes(root)
    lines.append("git status: clean" if not changes else
                 f"git status: {len(changes)} changed files (first: {changes[0].strip()})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="demo")
    print(summary(parser.parse_args(argv).dataset))
    return 0


if __name__ == "__main__":
    sys.exit(main())
