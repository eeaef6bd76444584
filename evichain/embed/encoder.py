"""Sentence-transformers encoder with an on-disk cache keyed by model and text hash.

``Embedder.encode`` returns L2-normalised float32 vectors. Texts already encoded by the same
model (same resolved name) are read from the cache, so a re-run encodes nothing twice.
Cache: SQLite at ``$EVICHAIN_EMBED_CACHE`` (default ``<user cache>/evichain/embeddings.sqlite``),
WAL mode, safe for several processes.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import platformdirs
from tqdm.auto import tqdm

from evichain.embed.params import EmbedParams
from evichain.embed.models import resolve_model_path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def default_embed_cache() -> Path:
    env = os.environ.get("EVICHAIN_EMBED_CACHE")
    return Path(env).expanduser() if env else Path(platformdirs.user_cache_dir("evichain")) / "embeddings.sqlite"


class EmbeddingCache:
    """(model, sha256(text)) → float32 vector, in SQLite."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_embed_cache()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._conn().execute(
            "CREATE TABLE IF NOT EXISTS vectors (model TEXT, key TEXT, vec BLOB, PRIMARY KEY (model, key))"
        )

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=60000")
            self._local.conn = conn
        return conn

    def get_many(self, model: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        conn = self._conn()
        for i in range(0, len(keys), 500):
            chunk = list(keys[i : i + 500])
            marks = ",".join("?" * len(chunk))
            for key, blob in conn.execute(
                f"SELECT key, vec FROM vectors WHERE model=? AND key IN ({marks})", [model, *chunk]
            ):
                out[key] = np.frombuffer(blob, dtype=np.float32)
        return out

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        conn = self._conn()
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT OR IGNORE INTO vectors VALUES (?,?,?)",
            [(model, k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items.items()],
        )
        conn.execute("COMMIT")


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Embedder:
    """Encode texts with a sentence-transformers model (normalised, cached, batched)."""

    def __init__(self, params: EmbedParams, cache: EmbeddingCache | None = None) -> None:
        self.params = params
        self.path = resolve_model_path(params.model)
        self.model_id = params.model
        self.cache = cache or EmbeddingCache()
        self._model = None
        self._lock = threading.Lock()
        self._encode_lock = threading.Lock()  # torch already uses every core: one batch at a time

    @property
    def model(self):  # type: ignore[no-untyped-def]
        with self._lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer

                self._model = SentenceTransformer(self.path, device=self.params.device)
            return self._model

    @property
    def dim(self) -> int:
        return int(self.model.get_embedding_dimension())

    def encode(self, texts: Sequence[str], *, progress: bool = False, desc: str = "encode") -> np.ndarray:
        """L2-normalised embeddings of ``texts`` (shape n × dim, float32), cache first."""
        keys = [text_key(t) for t in texts]
        found = self.cache.get_many(self.model_id, sorted(set(keys)))
        missing = sorted({k: t for k, t in zip(keys, texts) if k not in found}.items())
        if missing:
            vecs = self._encode_batches([t for _, t in missing], progress, desc)
            new = {k: v for (k, _), v in zip(missing, vecs)}
            self.cache.put_many(self.model_id, new)
            found.update(new)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def _encode_batches(self, texts: list[str], progress: bool, desc: str) -> np.ndarray:
        """Vectors of ``texts`` in input order, encoded in batches of texts of similar length
        (sorted by characters): a batch is padded to its longest text, so batches of mixed
        length waste most of their compute (measured: 2x faster on sentence-length facts)."""
        bs = self.params.batch_size
        order = np.argsort([len(t) for t in texts], kind="stable")
        by_length = [texts[i] for i in order]
        out = []
        bar = tqdm(total=len(texts), desc=desc, unit="text", disable=not progress)
        for i in range(0, len(by_length), bs):
            batch = by_length[i : i + bs]
            with self._encode_lock:
                out.append(self.model.encode(batch, batch_size=bs, normalize_embeddings=True,
                                             convert_to_numpy=True, show_progress_bar=False))
            bar.update(len(batch))
        bar.close()
        vectors = np.empty((len(texts), out[0].shape[1]), dtype=np.float32)
        vectors[order] = np.concatenate(out)
        return vectors


_EMBEDDERS: dict[EmbedParams, Embedder] = {}
_EMBEDDERS_LOCK = threading.Lock()


def get_embedder(params: EmbedParams) -> Embedder:
    """One embedder per params per process (the model loads once, even from many threads)."""
    with _EMBEDDERS_LOCK:
        if params not in _EMBEDDERS:
            _EMBEDDERS[params] = Embedder(params)
        return _EMBEDDERS[params]
