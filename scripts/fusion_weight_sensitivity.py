"""Post-hoc sensitivity of ``evireform-fused`` to its weight w (issue 38). Not used for any choice.

``fusion.weights`` was chosen on the tuning sample only (``scripts/tune_fusion.py``: w = 0.2
won on the 100 tuning questions and went into ``params.yaml`` before either reported sample
was fused with it; the first, 38-question choice was 0.5). This script answers the question a
reader of the reported numbers asks next: how much does the reported gain over PropRAG depend
on that choice? For w ∈ {0, 0.1, …, 1} it fuses the stored runs of every dataset of
``fusion_datasets`` exactly as the ``fuse`` stage does

    f(q, p) = w · s_robust(q, p) / max s_robust + (1 − w) · s_PropRAG(q, p) / max s_PropRAG

(:func:`evichain.retrieval.fusion.score_fusion`, top ``fusion.depth``) and reports R@5 and
Chain@5 with the paired 95 % bootstrap CI of fused(w) − PropRAG (the report's contrast code,
:func:`evichain.report.ablations.paired_contrasts`, same seeds). Reading a reported sample
across w is looking at test data: a w picked from these rows would be tuned on the test
questions, which is why the tuned w is marked and nothing here feeds ``params.yaml``.

Inputs: the DVC outputs ``artifacts/<dataset>/runs/{evireform-robust,proprag}.parquet`` (0 LLM
calls; ``dvc pull`` / ``dvc repro`` makes them). With ``--tuning`` the tuning sample's curve is
recomputed beside them (PropRAG re-run there, ~1 min, as ``tune_fusion.py`` does).

Run: ``python scripts/fusion_weight_sensitivity.py [--tuning]``; writes
``scripts/fusion_weight_sensitivity.results.md`` and ``reports/sensitivity/fusion_weight.png``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evichain.config import Params, load_params  # noqa: E402
from evichain.io import read_parquet, write_text  # noqa: E402
from evichain.metrics.retrieval import per_question_metrics  # noqa: E402
from evichain.paths import DatasetPaths  # noqa: E402
from evichain.report.ablations import paired_contrasts  # noqa: E402
from evichain.report.tables import ci_text, render_plain_markdown  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_fusion import GRID, fused_at, proprag_run  # noqa: E402  (the tuner's grid and fusion)

METRICS = ("Recall@5", "Chain@5")
OUT = Path(__file__).with_suffix(".results.md")
FIGURE = Path("reports/sensitivity/fusion_weight.png")


def stored_runs(dataset: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(robust run, PropRAG run, questions) of ``dataset`` from its DVC outputs; a missing
    file is an error naming the stage that makes it."""
    paths = DatasetPaths(dataset)
    for method, stage in (("evireform-robust", "retrieve_evireform"), ("proprag", "retrieve_graph")):
        if not paths.run(method).exists():
            raise SystemExit(f"{paths.run(method)} missing: dvc repro {stage}@{dataset}-"
                             f"{method.removeprefix('evireform-')}")
    return (read_parquet(paths.run("evireform-robust")), read_parquet(paths.run("proprag")),
            read_parquet(paths.questions))


def sweep(robust: pd.DataFrame, proprag: pd.DataFrame, questions: pd.DataFrame, dataset: str,
          depth: int, n_resamples: int = 10_000) -> pd.DataFrame:
    """One row per w: mean R@5 / Chain@5 of fused(w) and fused(w) − PropRAG with its paired CI."""
    base = per_question_metrics(proprag, questions)
    rows = []
    for w in GRID:
        fused = fused_at(robust, proprag, w, depth)
        per_q = {"fused": per_question_metrics(fused, questions), "proprag": base}
        ci = paired_contrasts(per_q, dataset, [("fused − PropRAG", "fused", "proprag")], METRICS,
                              n_resamples=n_resamples)
        row: dict[str, object] = {"w (robust)": w}
        for r in ci.itertuples():
            row[r.metric] = r.a_mean
            row[f"{r.metric} − PropRAG [95% CI]"] = ci_text(r.difference, r.ci_low, r.ci_high, signed=True)
            row[f"_{r.metric}_low"] = r.ci_low
        rows.append(row)
    return pd.DataFrame(rows)


def tuning_sweep(P: Params) -> tuple[str, pd.DataFrame]:
    """The tuning sample's sweep (PropRAG re-run in-process, robust from its stored run)."""
    dataset = P.tuning_datasets[0]
    paths = DatasetPaths(dataset)
    proprag, _ = proprag_run(P, dataset)
    return dataset, sweep(read_parquet(paths.run("evireform-robust")), proprag,
                          read_parquet(paths.questions), dataset, P.fusion.depth)


def plot(curves: dict[str, pd.DataFrame], tuned: float, path: Path) -> None:
    """R@5 and Chain@5 against w, one line per dataset, the tuned w marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharex=True)
    for ax, metric in zip(axes, METRICS):
        for name, table in curves.items():
            ax.plot(table["w (robust)"], table[metric], marker="o", ms=3, label=name)
        ax.axvline(tuned, color="grey", ls="--", lw=1)
        ax.set(title=metric, xlabel="w (weight of EviReform robust; 0 = PropRAG alone)")
    axes[0].set_ylabel("%")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def render(name: str, table: pd.DataFrame, tuned: float) -> str:
    """Markdown of one sweep, the tuned row in bold."""
    shown = table[[c for c in table.columns if not c.startswith("_")]].copy()
    shown["w (robust)"] = [f"**{w}** (tuned)" if w == tuned else str(w) for w in shown["w (robust)"]]
    return f"\n## {name}\n\n" + render_plain_markdown(shown) + "\n"


def main() -> None:
    P = load_params("params.yaml")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=list(P.fusion_datasets))
    ap.add_argument("--tuning", action="store_true", help="also sweep the tuning sample")
    args = ap.parse_args()
    tuned = float(P.fusion.weights[0])
    curves: dict[str, pd.DataFrame] = {}
    if args.tuning:
        name, table = tuning_sweep(P)
        curves[f"{name} (tuning)"] = table
    for ds in args.datasets:
        curves[ds] = sweep(*stored_runs(ds), ds, P.fusion.depth)
    plot(curves, tuned, FIGURE)
    text = (f"# evireform-fused: post-hoc sensitivity to w (not used for any choice)\n\n"
            f"`python scripts/fusion_weight_sensitivity.py{' --tuning' if args.tuning else ''}`. "
            f"Fused(w) = w · robust/max + (1 − w) · PropRAG/max, top {P.fusion.depth}; w = 0 is "
            f"PropRAG alone, w = 1 robust alone. The tuned w = {tuned} (params.yaml, chosen on the "
            "tuning sample by `scripts/tune_fusion.py`) is in bold. Rows of a reported sample are "
            "test data: a w read off them would be tuned on the test questions. CIs: paired "
            f"bootstrap, 10,000 resamples, the report's seeds. Figure: `{FIGURE}`.\n")
    text += "".join(render(name, table, tuned) for name, table in curves.items())
    write_text(text, OUT)
    print(text)


if __name__ == "__main__":
    main()
