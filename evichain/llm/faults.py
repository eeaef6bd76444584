"""Deterministic fault injection for the LLM client (reliability drills, issue "drills").

A fault is decided per (cache key, attempt number, seed) from a hash, so a drill is
reproducible and a retry of the same call can succeed. Enabled through ``llm.faults`` in
params or the ``EVICHAIN_FAULTS`` environment variable, e.g.
``EVICHAIN_FAULTS="timeout=0.1,rate_limit=0.1,server_error=0.05,malformed=0.05,seed=1"``.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Literal

FaultKind = Literal["timeout", "rate_limit", "server_error", "malformed"]
_KINDS: tuple[FaultKind, ...] = ("timeout", "rate_limit", "server_error", "malformed")


@dataclass(frozen=True)
class FaultPlan:
    """Fractions of attempts that fail in each way (their sum must be ≤ 1)."""

    timeout: float = 0.0
    rate_limit: float = 0.0
    server_error: float = 0.0
    malformed: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        total = self.timeout + self.rate_limit + self.server_error + self.malformed
        if total > 1.0 + 1e-9:
            raise ValueError(f"fault fractions sum to {total:.3f} > 1")

    @property
    def active(self) -> bool:
        return any(getattr(self, k) > 0 for k in _KINDS)

    def draw(self, key: str, attempt: int) -> FaultKind | None:
        """The fault (if any) for this attempt of the call with ``key``."""
        if not self.active:
            return None
        digest = hashlib.sha256(f"{self.seed}:{key}:{attempt}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        edge = 0.0
        for kind in _KINDS:
            edge += getattr(self, kind)
            if u < edge:
                return kind
        return None

    @classmethod
    def from_env(cls, fallback: "FaultPlan") -> "FaultPlan":
        """``EVICHAIN_FAULTS`` overrides the params plan when set."""
        spec = os.environ.get("EVICHAIN_FAULTS", "").strip()
        if not spec:
            return fallback
        values: dict[str, float | int] = {}
        for part in spec.split(","):
            name, _, value = part.partition("=")
            name = name.strip()
            if name not in (*_KINDS, "seed"):
                raise ValueError(f"EVICHAIN_FAULTS: unknown fault '{name}' (known: {_KINDS})")
            values[name] = int(value) if name == "seed" else float(value)
        return cls(**values)  # type: ignore[arg-type]


def corrupt(content: str) -> str:
    """Malformed output: the response truncated mid-way (as a cut-off generation)."""
    return content[: max(1, len(content) // 2)]
