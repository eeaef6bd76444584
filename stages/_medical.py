"""What the two GraphRAG-Bench Medical stages (``read_medical``, ``evaluate_medical``) share:
their options, params, paths, label, and running a medical flow on the selected task runner."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stages._common import run_stage

if TYPE_CHECKING:
    from evichain.config import MedicalQAParams, Params
    from evichain.paths import DatasetPaths


@dataclass
class MedicalStage:
    """One medical stage run: ``stage`` is its label ``<kind>@<dataset>-<method>``."""

    dataset: str
    method: str
    stage: str
    params: Params
    paths: DatasetPaths

    @property
    def medical(self) -> MedicalQAParams:
        return self.params.medical_qa

    def flow(self, flow: Any, *args: Any) -> Any:
        """``flow(*args)`` on the task runner of ``orchestration``."""
        from flows.common import with_runner

        return with_runner(flow, self.params.orchestration)(*args)


def run_medical_stage(kind: str, dataset: str, method: str, params_file: Path,
                      body: Callable[[MedicalStage], dict[str, Any]]) -> None:
    """:func:`stages._common.run_stage` of ``body`` under the label ``<kind>@<dataset>-<method>``."""
    stage = f"{kind}@{dataset}-{method}"

    def run() -> dict[str, Any]:
        from evichain.config import load_params
        from evichain.paths import DatasetPaths

        return body(MedicalStage(dataset, method, stage, load_params(params_file),
                                 DatasetPaths(dataset)))

    run_stage(stage, run)
