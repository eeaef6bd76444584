"""A hosted-style, OpenAI-compatible chat endpoint on 127.0.0.1 with set latency and faults.

:class:`FakeEndpoint` serves ``POST /v1/chat/completions`` from a background thread (stdlib
``ThreadingHTTPServer``, HTTP/1.1 keep-alive, one thread per connection) on a free port, as a
context manager. Each request is answered after ``latency_s`` (uniformly jittered by
``± jitter_s``) with a chat completion whose content comes from ``answer(messages)`` (default
:func:`digest_answer`, schema-valid for the reader prompts ``evichain.qa.prompts.READER`` /
``DIRECT``) and whose ``usage`` counts whitespace-separated words as tokens.

Faults (:class:`EndpointFaults`) are drawn per (seed, request id, arrival number of that id)
from a hash, so a run is reproducible whatever the order in which threads arrive, and a retry
of the same request draws afresh:

* ``rate_limit``: HTTP 429 with ``Retry-After`` (whole seconds) and ``retry-after-ms``;
* ``server_error``: an HTTP 5xx, one of ``server_statuses`` (default 500, 502, 503; equal
  shares);
* ``timeout``: the request is held ``hold_s`` (longer than the client's timeout) and the
  connection closed without an answer.

The request id is the SHA-256 of the canonical JSON of the messages (:func:`request_id`).
Every request is recorded (:class:`RequestRecord`); :meth:`FakeEndpoint.stats` counts, per
run, answers, faults, answers duplicated for one request id, re-sends of a request already
answered, retries sooner than a 429's ``Retry-After``, and the most answering requests in
flight at once (held timeouts excluded: the client has let go of them). It backs the
hosted-style scaling benchmark (``benchmarks/bench_hosted_scaling.py``, issue 62) and the
client's tests.
"""

from __future__ import annotations

import hashlib
import json
import math
import select
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

Outcome = Literal["ok", "rate_limit", "server_error", "timeout"]
Answerer = Callable[[list[dict[str, Any]]], str]
CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
_STATUS: dict[str, int] = {"ok": 200, "rate_limit": 429, "timeout": 0}


def request_id(messages: list[dict[str, Any]]) -> str:
    """SHA-256 of the canonical JSON (sorted keys, no spaces) of the chat ``messages``."""
    blob = json.dumps(messages, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def digest_answer(messages: list[dict[str, Any]]) -> str:
    """``{"answer": "<first 16 hex digits of SHA-256 of the last user message>"}``: a
    deterministic answer, valid for the reader prompts' schema ``{"answer": str}``, that
    tells which question it answers."""
    users = [m for m in messages if m.get("role") == "user"]
    if not users:
        raise ValueError("digest_answer: the request has no user message")
    text = str(users[-1].get("content", ""))
    return json.dumps({"answer": hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]})


def word_tokens(text: str) -> int:
    """Token count used in ``usage``: whitespace-separated words (a stand-in tokenizer)."""
    return len(text.split())


def unit_draw(seed: int, *parts: object) -> float:
    """A number in [0, 1) from SHA-256 of ``seed`` and ``parts``: the endpoint's seeded RNG,
    independent of the order in which requests arrive."""
    key = ":".join(str(p) for p in (seed, *parts))
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") / 2**64


@dataclass(frozen=True)
class EndpointFaults:
    """Fractions of requests that fail in each way, and how.

    ``retry_after_s``: the wait a 429 asks for. ``hold_s``: how long a timeout is held before
    the connection is closed unanswered (set it above the client's ``timeout_s``).
    ``faulted_attempts``: only the first n arrivals of one request id may fault (None: all).
    ``server_statuses``: the 5xx codes a server error is answered with (equal shares).
    """

    rate_limit: float = 0.0
    server_error: float = 0.0
    timeout: float = 0.0
    retry_after_s: float = 1.0
    hold_s: float = 0.0
    faulted_attempts: int | None = None
    server_statuses: tuple[int, ...] = (500, 502, 503)
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("rate_limit", "server_error", "timeout"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"EndpointFaults.{name} = {value}: a fraction must lie in [0, 1]")
        total = self.rate_limit + self.server_error + self.timeout
        if total > 1.0:
            raise ValueError(f"EndpointFaults: fault fractions sum to {total:.3f} > 1")
        if self.timeout > 0 and self.hold_s <= 0:
            raise ValueError("EndpointFaults.timeout > 0 needs hold_s > 0 (longer than the "
                             "client's timeout_s)")
        if self.retry_after_s < 0:
            raise ValueError(f"EndpointFaults.retry_after_s = {self.retry_after_s} < 0")
        if self.faulted_attempts is not None and self.faulted_attempts < 0:
            raise ValueError(f"EndpointFaults.faulted_attempts = {self.faulted_attempts} < 0")
        if not self.server_statuses or any(not 500 <= c <= 599 for c in self.server_statuses):
            raise ValueError(f"EndpointFaults.server_statuses = {self.server_statuses}: give one "
                             "or more 5xx codes")

    def draw(self, rid: str, attempt: int) -> tuple[Outcome, int]:
        """(outcome, HTTP status; 0 for a timeout) of arrival number ``attempt`` (0 = first)
        of request ``rid``: the unit draw falls into [0, rate_limit) → 429, the next
        ``server_error`` → one of ``server_statuses`` (equal sub-intervals), the next
        ``timeout`` → held, else ``ok`` → 200."""
        if self.faulted_attempts is not None and attempt >= self.faulted_attempts:
            return "ok", _STATUS["ok"]
        u = unit_draw(self.seed, "fault", rid, attempt)
        if u < self.rate_limit:
            return "rate_limit", _STATUS["rate_limit"]
        u -= self.rate_limit
        if u < self.server_error:
            share = int(u / self.server_error * len(self.server_statuses))
            return "server_error", self.server_statuses[min(share, len(self.server_statuses) - 1)]
        u -= self.server_error
        return ("timeout", _STATUS["timeout"]) if u < self.timeout else ("ok", _STATUS["ok"])


@dataclass(frozen=True)
class RequestRecord:
    """One request the endpoint received.

    ``attempt``: its arrival number for this request id (0 = first). ``status``: the HTTP
    status sent (0: held and closed unanswered). ``delivered``: the answer went out while the
    client was still connected (best effort: the peer's close is checked before writing).
    Times are ``time.monotonic()`` seconds: ``replied_s`` just before the answer is written
    (None for a timeout), ``finished_s`` after it (for a timeout, recorded when it is drawn,
    the end of its hold); ``cpu_s`` is the handler thread's CPU time.
    """

    request_id: str
    attempt: int
    outcome: Outcome
    status: int
    delivered: bool
    arrived_s: float
    replied_s: float | None
    finished_s: float
    cpu_s: float


@dataclass(frozen=True)
class EndpointStats:
    """What a run sent to the endpoint (see :meth:`FakeEndpoint.stats`).

    ``duplicated``: delivered 200s beyond the first for one request id. ``resent_after_answer``:
    arrivals of a request id whose previous arrival got a delivered 200 (no fault explains
    them). ``early_retries``: arrivals less than ``retry_after_s`` after that id's previous
    429 ended. ``max_in_flight``: most requests being answered at once, from the records'
    [arrived_s, replied_s) intervals (held timeouts and undelivered answers excluded: their
    client has let go): a
    client's slot cannot take a new request before it reads the answer, so this never
    exceeds the client's concurrency bound when the bound holds.
    """

    requests: int
    distinct: int
    answered: int
    undelivered: int
    rate_limited: int
    server_errors: int
    timeouts: int
    duplicated: int
    resent_after_answer: int
    early_retries: int
    max_in_flight: int
    server_cpu_s: float
    busy_s: float

    def as_dict(self) -> dict[str, int | float]:
        """The counters as a plain dict (for JSON)."""
        return dict(self.__dict__)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # a burst of 64+ new connections must not overflow the backlog
    endpoint: FakeEndpoint


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.endpoint._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.endpoint._track(self.connection, add=False)

    def do_POST(self) -> None:
        """Serve one chat-completions request (http.server's method name)."""
        self.server.endpoint._handle(self)

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: the endpoint keeps its own records."""


@dataclass
class FakeEndpoint:
    """OpenAI-compatible chat endpoint on 127.0.0.1 (module docstring); use ``with``."""

    latency_s: float = 0.0
    jitter_s: float = 0.0
    faults: EndpointFaults = field(default_factory=EndpointFaults)
    answer: Answerer = digest_answer
    seed: int = 0

    def __post_init__(self) -> None:
        if self.latency_s < 0 or self.jitter_s < 0 or self.jitter_s > self.latency_s:
            raise ValueError(f"FakeEndpoint: need 0 <= jitter_s <= latency_s, got latency_s="
                             f"{self.latency_s}, jitter_s={self.jitter_s}")
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified when no answer is in progress
        self._records: list[RequestRecord] = []
        self._arrivals: dict[str, int] = defaultdict(int)
        self._pending = 0  # answers being sent and not yet recorded
        self._conns: set[socket.socket] = set()
        self._stop = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> FakeEndpoint:
        """Bind a free port on 127.0.0.1 and serve from a daemon thread."""
        if self._server is not None:
            raise RuntimeError("FakeEndpoint already started")
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.endpoint = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-endpoint", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, wake held requests and close every open connection."""
        if self._server is None:
            return
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join()
        self._server = None

    def __enter__(self) -> FakeEndpoint:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def api_base(self) -> str:
        """``http://127.0.0.1:<port>/v1`` (what ``llm.api_base`` takes)."""
        if self._server is None:
            raise RuntimeError("FakeEndpoint not started: use it as a context manager")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    # ------------------------------------------------------------------ records
    def records(self, settle_s: float = 10.0) -> list[RequestRecord]:
        """Every request received so far, in the order they finished, once no answer is in
        progress (a client can read an answer before its handler has recorded it); waits at
        most ``settle_s`` for that."""
        with self._idle:
            if not self._idle.wait_for(lambda: self._pending == 0, timeout=settle_s):
                raise TimeoutError(f"FakeEndpoint: {self._pending} answers still in progress "
                                   f"after {settle_s} s")
            return list(self._records)

    def answered_ids(self) -> set[str]:
        """Request ids that got at least one delivered 200."""
        return {r.request_id for r in self.records() if r.status == 200 and r.delivered}

    def stats(self) -> EndpointStats:
        """Counters over :meth:`records` (definitions in :class:`EndpointStats`)."""
        records = self.records()
        by_id: dict[str, list[RequestRecord]] = defaultdict(list)
        for r in records:
            by_id[r.request_id].append(r)
        duplicated = resent = early = 0
        for chain in by_id.values():
            chain.sort(key=lambda r: r.attempt)
            duplicated += max(0, sum(r.status == 200 and r.delivered for r in chain) - 1)
            for prev, nxt in zip(chain, chain[1:]):
                resent += prev.status == 200 and prev.delivered
                early += (prev.outcome == "rate_limit"
                          and nxt.arrived_s - prev.finished_s < self.faults.retry_after_s)
        return EndpointStats(
            requests=len(records), distinct=len(by_id),
            answered=sum(r.status == 200 and r.delivered for r in records),
            undelivered=sum(r.status == 200 and not r.delivered for r in records),
            rate_limited=sum(r.outcome == "rate_limit" for r in records),
            server_errors=sum(r.outcome == "server_error" for r in records),
            timeouts=sum(r.outcome == "timeout" for r in records),
            duplicated=duplicated, resent_after_answer=resent, early_retries=early,
            max_in_flight=max_overlap([(r.arrived_s, r.replied_s) for r in records
                                       if r.replied_s is not None and r.delivered]),
            server_cpu_s=round(sum(r.cpu_s for r in records), 4),
            busy_s=round(sum(r.finished_s - r.arrived_s for r in records if r.outcome != "timeout"), 4),
        )

    # ------------------------------------------------------------------ serving
    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    def _handle(self, handler: _Handler) -> None:
        cpu0, arrived = time.thread_time(), time.monotonic()
        if handler.path.rstrip("/") not in CHAT_PATHS:
            handler.close_connection = True  # the unread body must not be parsed as a request
            _send(handler, 404, _error(f"no route {handler.path}; POST {CHAT_PATHS[0]}", "not_found"))
            return
        try:
            body = json.loads(handler.rfile.read(int(handler.headers.get("Content-Length", "0"))))
            messages = body["messages"]
        except (ValueError, KeyError, TypeError) as exc:
            handler.close_connection = True
            _send(handler, 400, _error(f"bad request body: {exc}", "invalid_request_error"))
            return
        rid = request_id(messages)
        with self._lock:
            attempt = self._arrivals[rid]
            self._arrivals[rid] += 1
        outcome, status = self.faults.draw(rid, attempt)
        if outcome == "timeout":  # recorded now, so a run's stats count it before the hold ends
            self._record(rid, attempt, outcome, status, False, arrived, cpu0,
                         finished=arrived + self.faults.hold_s)
            self._stop.wait(self.faults.hold_s)
            handler.close_connection = True
            return
        with self._lock:
            self._pending += 1
        delivered, replied = False, None
        try:
            delivered, replied = self._answer(handler, body, messages, rid, attempt, outcome, status)
        finally:  # recorded before it leaves the pending count, so settled records include it
            self._record(rid, attempt, outcome, status, delivered, arrived, cpu0, replied=replied)
            with self._lock:
                self._pending -= 1
                self._idle.notify_all()

    def _answer(self, handler: _Handler, body: dict[str, Any], messages: list[dict[str, Any]],
                rid: str, attempt: int, outcome: Outcome, status: int) -> tuple[bool, float]:
        """Send the drawn outcome; (it reached a connected client, when the reply began)."""
        if outcome == "rate_limit":
            wait = self.faults.retry_after_s
            headers = {"Retry-After": str(math.ceil(wait)), "retry-after-ms": str(round(1000 * wait))}
            replied = time.monotonic()
            return _send(handler, status, _error("rate limit reached (injected)", "rate_limit_exceeded"),
                         headers), replied
        if outcome != "ok":
            replied = time.monotonic()
            return _send(handler, status, _error(f"injected {outcome} {status}", "server_error")), replied
        u = unit_draw(self.seed, "latency", rid, attempt)
        self._stop.wait(self.latency_s + self.jitter_s * (2 * u - 1))
        content = self.answer(messages)
        prompt_tokens = sum(word_tokens(str(m.get("content", ""))) for m in messages)
        completion_tokens = word_tokens(content)
        payload = {
            "id": f"chatcmpl-{rid[:12]}-{attempt}", "object": "chat.completion",
            "created": int(time.time()), "model": str(body.get("model", "fake")),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }
        replied = time.monotonic()
        if _peer_gone(handler.connection):
            handler.close_connection = True
            return False, replied
        return _send(handler, status, payload), replied

    def _record(self, rid: str, attempt: int, outcome: Outcome, status: int, delivered: bool,
                arrived: float, cpu0: float, *, replied: float | None = None,
                finished: float | None = None) -> None:
        """Append a :class:`RequestRecord` (``finished``: now unless given, e.g. a hold's end)."""
        end = time.monotonic() if finished is None else finished
        record = RequestRecord(rid, attempt, outcome, status, delivered, arrived, replied, end,
                               time.thread_time() - cpu0)
        with self._lock:
            self._records.append(record)


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most half-open intervals [start, end) that contain one instant (a sweep over the
    sorted ends and starts; an end at t comes before a start at t)."""
    events = sorted([(end, -1) for _, end in intervals] + [(start, 1) for start, _ in intervals])
    best = current = 0
    for _, step in events:
        current += step
        best = max(best, current)
    return best


def _error(message: str, code: str) -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": code, "code": code, "param": None}}


def _peer_gone(conn: socket.socket) -> bool:
    """True when the client has closed (or reset) the connection: it is readable and a peek
    reads nothing. A request on a keep-alive connection is never pipelined by the client, so
    a readable socket here means a close."""
    try:
        readable, _, _ = select.select([conn], [], [], 0)
        return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _send(handler: _Handler, status: int, payload: dict[str, Any],
          headers: dict[str, str] | None = None) -> bool:
    """Write a JSON response; False when the client had gone."""
    data = json.dumps(payload).encode("utf-8")
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)
        handler.wfile.flush()
        return True
    except (BrokenPipeError, ConnectionResetError):
        handler.close_connection = True
        return False
