"""Parameters of the graph retrievers (``graph`` in ``params.yaml``)."""

from __future__ import annotations

from evichain.config import Section


class GraphParams(Section):
    """The ``graph`` section (paper defaults; unknown keys are errors)."""
