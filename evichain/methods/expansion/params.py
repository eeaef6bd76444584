"""Parameters of the query expansion baselines (``expansion`` in ``params.yaml``)."""

from __future__ import annotations

from evichain.config import Section


class ExpansionParams(Section):
    """The ``expansion`` section (paper defaults; unknown keys are errors)."""
