"""scripts/catrag_ablation.py: its variants switch off real CatRAG settings that are on by default."""

from __future__ import annotations

from pathlib import Path

from evichain.config import load_params
from scripts.catrag_ablation import VARIANTS


def test_every_variant_turns_off_a_default_on_catrag_switch() -> None:
    catrag = load_params(Path("params.yaml")).graph.catrag
    for name, update in VARIANTS.items():
        assert update, name
        for key, value in update.items():
            assert key in type(catrag).model_fields, (name, key)
            assert getattr(catrag, key) is True and value is False, (name, key)
        changed = catrag.model_copy(update=update)
        assert changed != catrag, name
