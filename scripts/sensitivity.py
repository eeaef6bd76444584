"""EviReform sensitivity lines (Figure of the paper's sweep) from ``dvc exp show --json``.

Run the one-at-a-time sweep of the README ("Parameters"), then:

    python scripts/sensitivity.py --dataset demo --method evireform-full [--metric Recall@5]

writes ``reports/plots/sensitivity.csv`` (param, value, dataset, method, metric, score,
experiment) and ``reports/sensitivity/<metric>.png`` (one panel per swept parameter, the
default marked). Not under ``reports/figures``: that folder is the ``report`` stage's output
and DVC clears it before each run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import typer

ROOT = Path(__file__).resolve().parents[1]
SWEPT = ["evireform.alpha", "evireform.beta", "evireform.k_r", "evireform.max_residual_queries"]

app = typer.Typer(add_completion=False)


@app.command()
def main(dataset: list[str] = typer.Option(["demo"]), method: list[str] = typer.Option(["evireform-full"]),
         metric: list[str] = typer.Option(["Recall@5", "Chain@5"])) -> None:
    sys.path.insert(0, str(ROOT))
    from evichain.config import load_params
    from evichain.io import write_text
    from evichain.paths import ReportPaths
    from evichain.report.figures import sensitivity_figure
    from evichain.report.sensitivity import flatten, one_at_a_time

    show = json.loads(subprocess.run(["dvc", "exp", "show", "--json", "-n", "20"], cwd=ROOT, check=True,
                                     capture_output=True, text=True).stdout)
    table = one_at_a_time(show, SWEPT, [(d, m) for d in dataset for m in method], metric)
    table = table[table.groupby("param")["value"].transform("nunique") >= 2]  # swept params only
    if table.empty:
        raise SystemExit("no one-at-a-time sweep found in `dvc exp show` (see README 'Parameters')")
    paths = ReportPaths()
    write_text(table.to_csv(index=False, lineterminator="\n"), paths.plot_data("sensitivity"))
    defaults = {k: float(v) for k, v in flatten(load_params().model_dump()).items() if k in SWEPT}
    folder = paths.root / "sensitivity"
    for m in metric:
        sensitivity_figure(table, folder / f"{m.replace('@', '')}.png", metric=m, defaults=defaults)
    print(f"{len(table)} sweep points -> {paths.plot_data('sensitivity')}, {folder}/")


if __name__ == "__main__":
    app()
