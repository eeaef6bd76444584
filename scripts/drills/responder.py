"""The scripted LLM of the reliability drills (``EVICHAIN_SCRIPTED_LLM=scripts.drills.responder:respond``).

Deterministic, schema-valid answers for every prompt the drilled stages send (EviReform
Listing 11 extraction, Listing 12 selection, Listing 13 reformulation, Listings 15/16, the QA
reader and direct prompts), computed from the request alone, so a re-run gives the same bytes.

Two environment variables make it a measuring instrument:

* ``EVICHAIN_DRILL_CALLS``: a file to which every call appends two lines (``S`` when it starts,
  ``E`` when it returns): ``phase<TAB>pid<TAB>kind<TAB>ident<TAB>unix time``. ``ident`` names
  the item (a hash of the paragraph, or the question), so drills count calls per item and per
  process, across processes (one ``O_APPEND`` write per line).
* ``EVICHAIN_DRILL_LATENCY_S``: seconds each call sleeps (time for a kill -9 or a race).
* ``EVICHAIN_DRILL_BARRIER``: a file; until it exists, calls wait (after logging ``W`` once
  per process), so that two processes can be made to start their LLM work together.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from typing import Any

_WORD = re.compile(r"[A-Za-z0-9]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_NAME = re.compile(r"\b[A-Z][\w'-]*(?:\s+(?:of|the|de|von|van)?\s*[A-Z][\w'-]*)*")


def ident_of(text: str) -> str:
    """The short hash that names a paragraph in the call log."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _log(phase: str, kind: str, ident: str) -> None:
    path = os.environ.get("EVICHAIN_DRILL_CALLS")
    if not path:
        return
    line = f"{phase}\t{os.getpid()}\t{kind}\t{ident}\t{time.time():.6f}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _words(text: str) -> set[str]:
    return {w for w in (t.lower() for t in _WORD.findall(text)) if len(w) > 3}


def classify(messages: list[dict[str, Any]]) -> tuple[str, Any]:
    """(prompt kind, parsed user data) of a chat request."""
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    # the first user message holds the data (a repair turn appends the bad reply and a request)
    user = next((m["content"] for m in messages if m["role"] == "user"), "")
    if user.startswith("Paragraph:\n"):
        return "extract", json.loads(user.removeprefix("Paragraph:\n"))
    try:
        data: Any = json.loads(user)
    except json.JSONDecodeError:
        data = user
    for prefix, kind in (("You compile", "select"), ("Given a question", "reformulate"),
                         ("You judge", "judge"), ("You are a bounded", "gaps"),
                         ("Answer the question using only", "read"),
                         ("Answer the question directly", "direct")):
        if system.startswith(prefix):
            return kind, data
    return "unknown", data


def ident(kind: str, data: Any) -> str:
    """What a call is about: the paragraph hash, or the question."""
    if kind == "extract":
        return ident_of(str(data))
    if isinstance(data, dict):
        return ident_of(str(data.get("q") or data.get("question") or ""))
    return ident_of(str(data))


def extract(paragraph: str) -> dict[str, Any]:
    """One proposition per sentence; entities = capitalised spans of the sentence."""
    props = []
    for sentence in _SENTENCE_END.split(" ".join(paragraph.split())):
        sentence = sentence.strip()
        if not _WORD.search(sentence):
            continue
        names = list(dict.fromkeys(m.group(0).strip() for m in _NAME.finditer(sentence)))
        props.append({"text": sentence, "entities": names[:6]})
    return {"propositions": props or [{"text": paragraph.strip()[:200] or "empty", "entities": []}]}


def select(data: dict[str, Any]) -> dict[str, Any]:
    """The (at most 3) candidates sharing most words with the question, ties by order."""
    q = _words(data["q"])
    scored = sorted(((-len(q & _words(c["t"])), n, c["i"]) for n, c in enumerate(data["c"])))
    return {"selected_proposition_ids": [i for _, _, i in scored[:3]]}


def reformulate(data: dict[str, Any]) -> dict[str, Any]:
    """One query: the question's words that the evidence does not contain, plus its names."""
    evidence = " ".join(e["text"] for e in data.get("e", []))
    missing = [w for w in _WORD.findall(data["q"]) if w.lower() not in _words(evidence)]
    names = [m.group(0) for m in _NAME.finditer(evidence)][:2]
    return {"queries": [" ".join(missing + names).strip() or data["q"]]}


_waited: set[str] = set()


def _barrier(kind: str) -> None:
    path = os.environ.get("EVICHAIN_DRILL_BARRIER")
    if not path or os.path.exists(path):
        return
    if path not in _waited:
        _waited.add(path)
        _log("W", kind, "-")
    while not os.path.exists(path):
        time.sleep(0.01)


def respond(messages: list[dict[str, Any]], model: str) -> str:
    """Answer one chat request (module docstring)."""
    kind, data = classify(messages)
    who = ident(kind, data)
    _barrier(kind)
    _log("S", kind, who)
    latency = float(os.environ.get("EVICHAIN_DRILL_LATENCY_S", "0") or 0)
    if latency > 0:
        time.sleep(latency)
    if kind == "extract":
        out: dict[str, Any] = extract(str(data))
    elif kind == "select":
        out = select(data)
    elif kind == "reformulate":
        out = reformulate(data)
    elif kind == "judge":
        out = {"ordered_doc_ids": [c["id"] for c in data["c"]]}
    elif kind == "gaps":
        out = {"sufficient": True, "gaps": []}
    elif kind == "read":
        evidence = data.get("evidence", []) if isinstance(data, dict) else []
        out = {"answer": evidence[0]["title"] if evidence else "unknown"}
    elif kind == "direct":
        out = {"answer": "unknown"}
    else:
        raise ValueError(f"drill responder: no script for prompt {messages[0]['content'][:60]!r}")
    _log("E", kind, who)
    return json.dumps(out, ensure_ascii=False)
