"""One entry point for the ``prepare`` stage: verify, convert and validate a dataset.

``prepare_dataset(name, source_dir, params)``: ``source_dir`` is the ``data/`` folder that holds
``SHA256SUMS`` and the per-benchmark folders. The SHA-256 of every file the conversion reads
is checked first; both tables are validated last (gold passages are required for every
dataset except ``medical``); a validation error names the dataset's source files.
Nothing is written here: the stage writes the two tables (polars frames).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from evichain.data import demo, hotpotqa, medical, musique, twowiki
from evichain.data.params import DataParams
from evichain.data.sample import sample_questions
from evichain.data.schema import validate_corpus, validate_questions
from evichain.data.sources import SHARED_HINT, MalformedSourceError, verify_sources
from evichain.params_base import DATASETS, SAMPLE_DATASETS

Tables = tuple[pl.DataFrame, pl.DataFrame]
Converter = Callable[[Path, DataParams], Tables]

_CONVERTERS: dict[str, tuple[tuple[str, ...], Converter]] = {
    "demo": (demo.FILES, lambda d, p: demo.tables(d, p.demo.n_questions, p.demo.max_passages,
                                                   p.demo.max_distractor_words,
                                                   p.demo.max_gold_words)),
    "2wiki": (twowiki.FILES, lambda d, p: twowiki.tables(d)),
    "musique": (musique.FILES, lambda d, p: musique.tables(d)),
    "hotpotqa": (hotpotqa.FILES, lambda d, p: hotpotqa.tables(d)),
    "medical": (
        medical.FILES,
        lambda d, p: medical.tables(d, p.medical.chunk_words, p.medical.overlap_words),
    ),
}
WITHOUT_GOLD: frozenset[str] = frozenset({"medical", "medical_s"})


def _sampled(name: str) -> tuple[tuple[str, ...], Converter]:
    """The converter of sample dataset ``name``: its source's tables, questions sampled."""

    def convert(source_dir: Path, params: DataParams) -> Tables:
        spec = params.samples.get(name)
        if spec is None:
            raise ValueError(f"dataset {name!r} needs data.samples.{name} in params.yaml")
        corpus, questions = _CONVERTERS[spec.source][1](source_dir, params)
        return corpus, sample_questions(questions, spec.n_questions, spec.per_type, spec.offset)

    return _CONVERTERS[sample_source(name)][0], convert


def sample_source(name: str) -> str:
    """The benchmark a sample dataset's files come from: its name up to the first ``_``
    (``2wiki_s`` and ``2wiki_tune_s`` → ``2wiki``)."""
    return name.split("_", 1)[0]


def source_files(name: str) -> tuple[str, ...]:
    """The source files (relative to ``data/``) that dataset ``name`` is built from."""
    return _converter(name)[0]


def prepare_dataset(name: str, source_dir: Path, params: DataParams) -> Tables:
    """(corpus, questions) of dataset ``name``, checksummed, converted and validated."""
    files, convert = _converter(name)
    source_dir = Path(source_dir)
    verify_sources(source_dir, files)
    corpus, questions = convert(source_dir, params)
    try:
        validate_corpus(corpus)
        validate_questions(questions, corpus, require_gold=name not in WITHOUT_GOLD)
    except ValueError as exc:  # the record is bad: name the files it came from and what to do
        sources = ", ".join(str(source_dir / rel) for rel in files)
        raise MalformedSourceError(
            f"dataset {name!r} (from {sources}): {exc}; fix or remove that record in the source "
            f"file, or {SHARED_HINT}"
        ) from None
    return corpus, questions


def _converter(name: str) -> tuple[tuple[str, ...], Converter]:
    if name in SAMPLE_DATASETS:
        return _sampled(name)
    if name not in _CONVERTERS:
        raise ValueError(f"unknown dataset {name!r}; known: {list(DATASETS)}")
    return _CONVERTERS[name]
