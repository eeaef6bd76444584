"""Time :func:`evichain.metrics.bootstrap.bootstrap_table` at paper scale.

10,000 resamples x 10 methods x 8 metrics x 1,000 questions (synthetic per-question values:
binary Hit/Chain-like columns and fractional Recall/F1-like columns). Writes the timing to
``benchmarks/bench_bootstrap.results.md`` beside this script.

Run: ``python -m benchmarks.bench_bootstrap``
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd

from evichain.io import write_text
from evichain.metrics.bootstrap import N_RESAMPLES, bootstrap_table

N_METHODS, N_QUESTIONS, REPEATS = 10, 1_000, 3
METRICS = ["Recall@2", "Recall@5", "Recall@10", "Chain@5", "Hit@5", "nDCG@10", "EM", "F1"]
RESULTS = Path(__file__).with_suffix(".results.md")


def synthetic_per_q(seed: int = 0) -> dict[str, pd.DataFrame]:
    """Per-question tables of ``N_METHODS`` methods on the same ``N_QUESTIONS`` questions."""
    rng = np.random.default_rng(seed)
    qids = [f"q{i:05d}" for i in range(N_QUESTIONS)]
    tables = {}
    for m in range(N_METHODS):
        cols = {
            metric: (rng.random(N_QUESTIONS) < 0.6).astype(float)
            if metric in {"Chain@5", "Hit@5", "EM"}
            else rng.integers(0, 4, N_QUESTIONS) / 3
            for metric in METRICS
        }
        tables[f"method_{m}"] = pd.DataFrame({"question_id": qids, **cols})
    return tables


def main() -> None:
    per_q = synthetic_per_q()
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        table = bootstrap_table(per_q, METRICS, "bench", "method_0")
        times.append(time.perf_counter() - start)
    text = "\n".join(
        [
            "# bootstrap_table benchmark",
            "",
            f"- workload: {N_RESAMPLES:,} resamples x {N_METHODS} methods x {len(METRICS)} "
            f"metrics x {N_QUESTIONS:,} questions (+ {len(METRICS)} paired differences)",
            f"- output rows: {len(table)}",
            f"- wall time per call (s), {REPEATS} repeats: "
            + ", ".join(f"{t:.2f}" for t in times),
            f"- best: {min(times):.2f} s",
            f"- machine: {platform.machine()}, {os.cpu_count()} CPU(s), Python "
            f"{platform.python_version()}, numpy {np.__version__}, pandas {pd.__version__}",
            "",
        ]
    )
    write_text(text, RESULTS)
    print(text)


if __name__ == "__main__":
    main()
