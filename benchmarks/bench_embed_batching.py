"""Encoding speed of :class:`evichain.embed.Embedder`: batches in length order against batches in
arbitrary (text-hash) order, which is what the encoder did before 2026-12-03.

A batch is padded to its longest text, so mixing short and long texts in one batch wastes most
of the transformer's compute. The workload is a random sample of ``2wiki_s``'s graph facts (the
HippoRAG 2 / CatRAG index, ``fact_text`` of each triple, sentence-length) encoded with
``embed.model`` from ``params.yaml``, with no cache. Writes ``benchmarks/bench_embed_batching.results.md``.

Needs ``artifacts/2wiki_s/index/triples.parquet``
(``dvc repro extract_triples@2wiki_s``, a minute). Run: ``python -m benchmarks.bench_embed_batching``
"""

from __future__ import annotations

import platform
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from evichain.config import load_params
from evichain.embed import Embedder, EmbeddingCache
from evichain.embed.encoder import text_key
from evichain.io import read_parquet, write_text
from evichain.methods.graph.graph import fact_text

N_TEXTS, SEED = 2048, 0
RESULTS = Path(__file__).with_suffix(".results.md")
TRIPLES = Path("artifacts/2wiki_s/index/triples.parquet")


def sample_facts() -> list[str]:
    """``N_TEXTS`` distinct fact texts of ``2wiki_s``, sampled with ``SEED``."""
    t = read_parquet(TRIPLES, columns=["subject", "predicate", "object"])
    texts = sorted({fact_text(f) for f in zip(t.subject, t.predicate, t.object)})
    return random.Random(SEED).sample(texts, N_TEXTS)


def hash_ordered(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """The former path: texts in cache-key order, consecutive batches of ``batch_size``."""
    order = sorted(range(len(texts)), key=lambda i: text_key(texts[i]))
    bs = embedder.params.batch_size
    parts = [embedder.model.encode([texts[i] for i in order[s:s + bs]], batch_size=bs,
                                   normalize_embeddings=True, convert_to_numpy=True)
             for s in range(0, len(order), bs)]
    out = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
    out[order] = np.concatenate(parts)
    return out


def timed(fn: Callable[..., np.ndarray], *args: Any) -> tuple[np.ndarray, float]:
    """``fn(*args)`` and its wall time in seconds."""
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


def main() -> None:
    params = load_params("params.yaml")
    embedder = Embedder(params.embed, cache=EmbeddingCache(Path("/tmp/bench-embed-unused.sqlite")))
    texts = sample_facts()
    tokens = [len(ids) for ids in embedder.model.tokenizer(texts)["input_ids"]]
    embedder.model.encode(texts[:64])  # warm-up
    before, t_hash = timed(hash_ordered, embedder, texts)
    after, t_sorted = timed(embedder._encode_batches, texts, False, "bench")
    lines = [
        "# Embedding batches: length order against hash order",
        "",
        f"- workload: {N_TEXTS:,} distinct `2wiki_s` graph facts (seed {SEED}); tokens per text: "
        f"mean {np.mean(tokens):.1f}, median {np.median(tokens):.0f}, max {max(tokens)}",
        f"- model: `{params.embed.model}`, batch_size {params.embed.batch_size}, "
        f"torch threads {torch.get_num_threads()}",
        f"- hash order (before): {t_hash:.1f} s, {N_TEXTS / t_hash:.1f} texts/s",
        f"- length order (`Embedder._encode_batches`): {t_sorted:.1f} s, {N_TEXTS / t_sorted:.1f} texts/s "
        f"({t_hash / t_sorted:.2f}x)",
        f"- largest absolute difference between the two vectors of a text: {np.abs(before - after).max():.1e}",
        f"- machine: {platform.machine()}, {torch.get_num_threads()} threads, Python {platform.python_version()}",
    ]
    write_text("\n".join(lines) + "\n", RESULTS)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
