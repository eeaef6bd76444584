"""Where every artifact of a dataset lives (one place, so stages and tests agree)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DatasetPaths:
    """Artifact paths of one dataset under ``artifacts/<dataset>/``."""

    dataset: str
    root: Path = Path("artifacts")

    @property
    def dir(self) -> Path:
        return self.root / self.dataset

    @property
    def corpus(self) -> Path:
        return self.dir / "corpus.parquet"

    @property
    def questions(self) -> Path:
        return self.dir / "questions.parquet"

    def run(self, method: str) -> Path:
        return self.dir / "runs" / f"{method}.parquet"

    def trace(self, method: str) -> Path:
        return self.dir / "traces" / f"{method}.parquet"

    def evidence(self, method: str) -> Path:
        """An iterative method's own final evidence for the reader: ``question_id, position,
        passage_id, title, text`` (text may be a passage or selected sentences of one)."""
        return self.dir / "evidence" / f"{method}.parquet"

    def usage(self, stage: str) -> Path:
        return self.dir / "usage" / f"{stage}.json"

    def qa(self, method: str) -> Path:
        return self.dir / "qa" / f"{method}.parquet"

    def per_question(self, method: str) -> Path:
        """Per-question metrics of this dataset, in the reports folder beside the artifacts root
        (``<root>/../reports``): see :meth:`ReportPaths.per_question`."""
        return ReportPaths(self.root.parent / "reports").per_question(self.dataset, method)

    def index_file(self, name: str) -> Path:
        return self.dir / "index" / name


@dataclass(frozen=True)
class ReportPaths:
    """Report outputs under ``reports/``."""

    root: Path = Path("reports")

    def metrics(self, dataset: str, method: str) -> Path:
        return self.root / "metrics" / dataset / f"{method}.json"

    @property
    def per_question_root(self) -> Path:
        return self.root / "eval"

    def per_question(self, dataset: str, method: str) -> Path:
        """``reports/eval/<ds>/<method>.parquet``: committed with the metrics JSON (small, not
        DVC cached), so the report's paired bootstrap and ablation contrasts can be regenerated
        on a clean clone, where the DVC-cached runs they came from are absent."""
        return self.per_question_root / dataset / f"{method}.parquet"

    def plot_data(self, name: str) -> Path:
        return self.root / "plots" / f"{name}.csv"

    def figure(self, name: str) -> Path:
        return self.root / "figures" / f"{name}.png"

    @property
    def index_stats(self) -> Path:
        """``reports/index_stats``: the committed index statistics (:mod:`evichain.report.index_stats`),
        written by the index stages, read by the report."""
        return self.root / "index_stats"
