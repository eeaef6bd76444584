"""Parameters of the rerankers (``rerank`` in ``params.yaml``)."""

from __future__ import annotations

from evichain.config import Section


class RerankParams(Section):
    """The ``rerank`` section (paper defaults; unknown keys are errors)."""
