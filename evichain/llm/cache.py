"""Content-addressed SQLite cache of validated LLM responses.

* Location: ``$EVICHAIN_LLM_CACHE`` or ``<user cache dir>/evichain/llm-cache.sqlite`` — outside
  the repository, because queued ``dvc exp`` runs execute in a temporary copy of the repo and
  DVC deletes stage outputs before re-running a stage.
* Key: SHA-256 of a canonical JSON of (cache version, model, messages, sampling settings,
  response schema, prompt name@version). See :func:`cache_key`.
* Only validated responses are stored; failures and malformed output never are.
* Several processes may read and write at once: WAL journal, a busy timeout, ``INSERT OR
  IGNORE`` (the first writer of a key wins; all writers of one key wrote the same content
  for a deterministic model, and any validated answer is acceptable for a sampled one).
* Recorded caches: :meth:`LLMCache.export` writes one run's rows to a compact file (committed
  under ``reproduce/``); :meth:`LLMCache.merge` adds such a file's missing rows (``evichain cache``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

CACHE_VERSION = "1"

_SUMMARY = ("SELECT prompt, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens) "
            "FROM responses GROUP BY prompt ORDER BY prompt")


def default_cache_path() -> Path:
    """``$EVICHAIN_LLM_CACHE`` or the per-user cache directory."""
    env = os.environ.get("EVICHAIN_LLM_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_cache_dir("evichain")) / "llm-cache.sqlite"


def cache_key(
    *,
    model: str,
    messages: list[dict[str, str]],
    sampling: dict[str, Any],
    schema: dict[str, Any] | None,
    prompt: str,
) -> str:
    """SHA-256 over everything that can change a response (and the cache format version)."""
    payload = {
        "cache_version": CACHE_VERSION,
        "model": model,
        "messages": messages,
        "sampling": sampling,
        "schema": schema,
        "prompt": prompt,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedResponse:
    content: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    from_cache: bool = False


_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    prompt TEXT NOT NULL,
    content TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    created_at REAL NOT NULL
)
"""


class LLMCache:
    """Thread-safe, multi-process-safe response cache (one connection per thread)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connect() as conn:
            conn.execute(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=60000")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def get(self, key: str) -> CachedResponse | None:
        """The stored response for ``key``, or None."""
        row = self._connect().execute(
            "SELECT content, prompt_tokens, completion_tokens, cost_usd FROM responses WHERE key=?",
            (key,),
        ).fetchone()
        return CachedResponse(*row, from_cache=True) if row else None

    def put(self, key: str, *, model: str, prompt: str, response: CachedResponse) -> None:
        """Store a validated response; an existing entry for ``key`` is kept."""
        self._connect().execute(
            "INSERT OR IGNORE INTO responses VALUES (?,?,?,?,?,?,?,?)",
            (key, model, prompt, response.content, response.prompt_tokens,
             response.completion_tokens, response.cost_usd, time.time()),
        )

    def count(self) -> int:
        return int(self._connect().execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def keys(self) -> set[str]:
        return {r[0] for r in self._connect().execute("SELECT key FROM responses")}

    def merge(self, source: str | Path) -> int:
        """Copy every row of the cache file ``source`` that this cache lacks; the number copied.

        An existing key is kept (the same rule as :meth:`put`), so importing a recorded cache
        never changes an answer already here; a long run resumed on a fresh machine after
        importing the cache it recorded so far repeats none of its answered calls.
        """
        source = Path(source)
        if not source.is_file():
            raise FileNotFoundError(f"{source}: no such LLM cache file")
        with _attached(self._connect(), source) as conn:
            cur = conn.execute("INSERT OR IGNORE INTO responses SELECT * FROM source.responses")
        return cur.rowcount

    def export(self, dest: str | Path, *, since: float | None = None,
               prompts: Sequence[str] = ()) -> int:
        """Write the selected rows to a new, compact cache file ``dest``; the number written.

        Selection: rows stored at or after the Unix time ``since`` (one run's answers on a
        machine that also holds others), and with a prompt key ``<name>@<version>`` whose name
        is in ``prompts`` (all when empty). ``dest`` must not exist: a recorded cache is a
        committed artefact and is never overwritten in place.
        """
        dest = Path(dest)
        if dest.exists():
            raise FileExistsError(f"{dest}: exists; remove it first or choose another name")
        where, args = _selection(since, prompts)
        dest.parent.mkdir(parents=True, exist_ok=True)
        out = LLMCache(dest)
        with _attached(out._connect(), self.path) as conn:
            written = conn.execute(f"INSERT INTO responses SELECT * FROM source.responses{where}",
                                   args).rowcount
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute("VACUUM")
        out.close()
        return written

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def read_summary(path: str | Path) -> list[tuple[str, int, int, int]]:
    """(prompt key, rows, prompt tokens, completion tokens) per prompt key, by key, of the
    cache file ``path``, opened read-only: a committed recorded cache is left byte-for-byte as
    it is (no WAL switch, no schema, no new file)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such LLM cache file")
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return [tuple(r) for r in conn.execute(_SUMMARY)]  # type: ignore[misc]
    finally:
        conn.close()


@contextmanager
def _attached(conn: sqlite3.Connection, path: Path) -> Iterator[sqlite3.Connection]:
    """``conn`` with the cache file ``path`` attached as schema ``source`` for the block."""
    conn.execute("ATTACH DATABASE ? AS source", (str(path),))
    try:
        yield conn
    finally:
        conn.execute("DETACH DATABASE source")


def _selection(since: float | None, prompts: Sequence[str]) -> tuple[str, list[Any]]:
    """SQL ``WHERE`` clause and its arguments for :meth:`LLMCache.export`."""
    clauses: list[str] = []
    args: list[Any] = []
    if since is not None:
        clauses.append("created_at >= ?")
        args.append(float(since))
    if prompts:
        clauses.append("(" + " OR ".join("substr(prompt, 1, ?) = ?" for _ in prompts) + ")")
        for name in prompts:
            args.extend([len(name) + 1, f"{name}@"])
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), args
