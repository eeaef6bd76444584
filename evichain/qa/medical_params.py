"""Parameters of GraphRAG-Bench Medical answering and judging (``medical_qa`` in ``params.yaml``)."""

from __future__ import annotations

from evichain.config import Section


class MedicalQAParams(Section):
    """The ``medical_qa`` section (unknown keys are errors)."""
