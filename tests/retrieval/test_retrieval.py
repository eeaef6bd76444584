"""BM25 and dense retrieval on a tiny corpus; run-table conventions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa

from evichain.config import BM25Params, DenseParams, EmbedParams
from evichain.embed import get_embedder
from evichain.retrieval.bm25 import BM25Index
from evichain.retrieval.dense import DenseIndex
from evichain.retrieval.run import (
    RUN_SCHEMA,
    run_from_scores,
    run_rows,
    run_table,
    top_k_indices,
)

CORPUS = pd.DataFrame({
    "passage_id": ["p1", "p2", "p3", "p4"],
    "title": ["Lothair II", "Ermengarde of Tours", "Paris", "Teutberga"],
    "text": [
        "Lothair II was king of Lotharingia. He was the son of Ermengarde of Tours.",
        "Ermengarde of Tours died on 20 March 851.",
        "Paris is the capital and largest city of France.",
        "Teutberga was a queen of Lotharingia by marriage to Lothair II.",
    ],
})


def test_top_k_breaks_ties_by_stored_order() -> None:
    assert top_k_indices(np.array([1.0, 3.0, 3.0, 2.0, 3.0]), 2).tolist() == [1, 2]
    assert top_k_indices(np.array([0.5, 0.5, 0.5]), 5).tolist() == [0, 1, 2]


def test_run_from_scores_shape_and_positive_only() -> None:
    scores = np.array([[0.0, 2.0, 1.0], [0.0, 0.0, 0.0]])
    run = run_from_scores(["a", "b"], scores, ["x", "y", "z"], k=3, positive_only=True)
    assert run.schema == RUN_SCHEMA
    assert run.to_dict(as_series=False) == {"question_id": ["a", "a"], "rank": [1, 2],
                                            "passage_id": ["y", "z"], "score": [2.0, 1.0]}


def test_bm25_ranks_lexical_match_first_and_skips_non_matching() -> None:
    index = BM25Index(CORPUS, BM25Params(top_k=4))
    run = index.search(["q1", "q2"], ["capital of France", "zzzz unknownword"])
    assert run[run.question_id == "q1"].passage_id.tolist() == ["p3"]
    assert run[run.question_id == "q2"].empty
    scores = index.scores(["Ermengarde died"])
    assert scores.shape == (1, 4) and scores[0].argmax() == 1


def test_bm25_reads_a_polars_corpus_and_rows_are_the_run_table() -> None:
    """A polars corpus indexes as the pandas one; ``search_rows`` are ``search``'s rows; the
    polars run (``run_rows``) has the run table's dtypes."""
    queries = (["q1", "q2"], ["Lothair II king", "queen of Lotharingia"])
    from_pandas = BM25Index(CORPUS, BM25Params(top_k=3))
    from_polars = BM25Index(pl.from_pandas(CORPUS), BM25Params(top_k=3))
    rows = from_polars.search_rows(*queries)
    assert rows == list(from_pandas.search(*queries).itertuples(index=False, name=None))
    assert run_rows(rows).to_arrow().schema == pa.Table.from_pandas(
        run_table(rows), preserve_index=False).schema.remove_metadata()


def test_bm25_stemming_matches_inflections() -> None:
    index = BM25Index(CORPUS, BM25Params())
    assert index.scores(["queens"])[0].argmax() == 3  # "queen" stems like "queens"


def test_dense_retrieval_with_real_minilm() -> None:
    embedder = get_embedder(EmbedParams())
    index = DenseIndex(CORPUS, DenseParams(top_k=2), embedder)
    assert np.allclose(np.linalg.norm(index.vectors, axis=1), 1.0, atol=1e-5)
    run = index.search(["q"], ["When did the mother of Lothair II die?"])
    assert len(run) == 2 and set(run.passage_id) <= {"p1", "p2", "p4"}
    assert run.score.is_monotonic_decreasing


def test_embedding_cache_avoids_reencoding(tmp_path, monkeypatch) -> None:
    from evichain.embed import Embedder, EmbeddingCache

    embedder = Embedder(EmbedParams(), cache=EmbeddingCache(tmp_path / "e.sqlite"))
    first = embedder.encode(["alpha beta", "gamma"])
    calls = []
    monkeypatch.setattr(embedder, "_encode_batches", lambda texts, *a: calls.append(texts) or None)
    again = embedder.encode(["gamma", "alpha beta"])
    assert calls == [] and np.array_equal(again, first[::-1])


def test_length_sorted_batches_return_vectors_in_input_order(tmp_path, monkeypatch) -> None:
    from evichain.embed import Embedder, EmbeddingCache

    texts = ["a much longer text about the queen of Lotharingia and her marriage", "Paris",
             "Ermengarde of Tours died in 851", "king"]
    embedder = Embedder(EmbedParams(batch_size=2), cache=EmbeddingCache(tmp_path / "e.sqlite"))
    alone = np.stack([embedder.model.encode([t], normalize_embeddings=True)[0] for t in texts])
    batches: list[list[str]] = []
    encode = embedder.model.encode
    monkeypatch.setattr(embedder.model, "encode", lambda batch, **kw: batches.append(batch) or encode(batch, **kw))
    together = embedder._encode_batches(texts, False, "t")
    assert batches == [["king", "Paris"], ["Ermengarde of Tours died in 851", texts[0]]]
    assert np.allclose(together, alone, atol=1e-5)
