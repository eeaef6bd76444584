"""Params of the ``fused`` method (block ``fused``): where ``seeds-fused`` reads its fusion
settings. ``evireform-fused`` reads the ``fusion`` block of :class:`evichain.config.Params`."""

from __future__ import annotations

from evichain.params_base import Section, register_block


class FusedParams(Section):
    """``fused`` block: ``seeds_record`` = the seed-fusion tuning record (JSON written by
    ``scripts/tune_seed_fusion.py`` on ``tuning_datasets`` only; its ``runs``, ``chosen_w`` and
    ``depth``), relative to the working directory, as the ``fuse_seeds`` stage reads it."""

    seeds_record: str = "reports/tuning/2wiki_tune_s-seed_fusion.json"


register_block("fused", FusedParams)
