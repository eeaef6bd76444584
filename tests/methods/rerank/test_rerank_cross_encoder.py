"""Cross-encoder reranker: a tiny random BERT cross-encoder built in the test (no downloaded
weights), order = order of the model's scores, ties keep the pool order, and the typed error
when the named model has no offline weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evichain.embed.models import ModelNotFound
from evichain.methods.rerank.cross_encoder import (CrossEncoderReranker, CrossEncoderWeightsMissing,
                                                   load_cross_encoder, offline_weights_available,
                                                   order_by_scores)
from evichain.methods.rerank.params import CrossEncoderParams
from evichain.methods.rerank.pool import Candidate

WORDS = ("the a of is was who when where what king queen france died born city river paris "
         "lothair tours erstein abbey mother son wife emperor").split()
POOL = [Candidate(f"d{i}", title, text, 1.0 - i / 10) for i, (title, text) in enumerate([
    ("Lothair", "lothair was king of france"), ("Tours", "tours is a city on a river"),
    ("Erstein", "erstein abbey where the queen died"), ("Paris", "paris is a city in france"),
    ("Emperor", "the emperor was the son of a king")])]


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    root = tmp_path_factory.mktemp("tiny-ce")
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    torch.manual_seed(7)
    config = BertConfig(vocab_size=5 + len(WORDS), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
                        num_labels=1)
    model_dir = root / "model"
    BertForSequenceClassification(config).save_pretrained(model_dir)
    BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(model_dir)
    return model_dir


def test_order_by_scores_is_stable_on_ties() -> None:
    assert order_by_scores([0.1, 0.5, 0.5, 0.9, 0.1]) == [3, 1, 2, 0, 4]


def test_reranked_order_equals_the_model_score_order(tiny_model_dir: Path) -> None:
    params = CrossEncoderParams(model=str(tiny_model_dir), max_length=64, batch_size=2)
    assert offline_weights_available(str(tiny_model_dir))
    model = load_cross_encoder(params)
    result = CrossEncoderReranker(model, params).rerank("when did the queen of lothair die", POOL)
    direct = model.predict([("when did the queen of lothair die", f"{c.title}\n{c.text}") for c in POOL])
    assert np.allclose(result.scores, direct, atol=1e-6)
    assert result.order == [POOL[i].passage_id for i in np.argsort(-np.asarray(direct), kind="stable")]
    assert sorted(result.order) == sorted(c.passage_id for c in POOL)   # nothing added or dropped


def test_ties_keep_the_pool_order() -> None:
    class Flat:
        def predict(self, pairs, **_: object) -> np.ndarray:  # type: ignore[no-untyped-def]
            return np.array([0.2, 0.7, 0.2, 0.7, 0.2])

    result = CrossEncoderReranker(Flat(), CrossEncoderParams()).rerank("q", POOL)
    assert result.order == ["d1", "d3", "d0", "d2", "d4"]


def test_missing_offline_weights_is_a_typed_error_naming_the_model(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    assert not offline_weights_available("BAAI/bge-reranker-large")
    assert not offline_weights_available(str(tmp_path))              # a directory without a model
    missing = "BAAI/bge-reranker-large.*no offline weights"
    with pytest.raises(CrossEncoderWeightsMissing, match=missing) as err:
        load_cross_encoder(CrossEncoderParams())
    assert isinstance(err.value, ModelNotFound)


def test_a_cached_hub_snapshot_counts_as_offline_weights(tmp_path: Path, tiny_model_dir: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    import huggingface_hub.constants

    hub = tmp_path / "hub"
    repo = hub / "models--acme--tiny-reranker"
    shutil.copytree(tiny_model_dir, repo / "snapshots" / "abc123")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    assert offline_weights_available("acme/tiny-reranker")
    model = load_cross_encoder(CrossEncoderParams(model="acme/tiny-reranker", max_length=64))
    assert len(model.predict([("king", "lothair was king")])) == 1
