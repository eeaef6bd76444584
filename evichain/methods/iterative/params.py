"""Parameters of the iterative retrieval baselines (``iterative`` in ``params.yaml``)."""

from __future__ import annotations

from evichain.config import Section


class IterativeParams(Section):
    """The ``iterative`` section (paper defaults; unknown keys are errors)."""
