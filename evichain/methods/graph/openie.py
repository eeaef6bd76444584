"""The shared OpenIE index of HippoRAG 2 / CatRAG (EviReform Appendix C.6: "HippoRAG 2, CatRAG,
and GeAR use the same extracted index"), re-implemented.

Two ways to fill the same triple table:

* ``llm`` (HippoRAG's OpenIE): per passage, (1) named entities (:data:`~.prompts.NER`), then
  (2) triples conditioned on the paragraph and its named entities (:data:`~.prompts.TRIPLES`),
  both through :class:`~evichain.llm.LLMClient`. Replies are repaired item by item: a triple
  that is not three non-empty strings is dropped and counted (``n_invalid_triples``), a repeated
  triple is dropped and counted (``n_duplicate_triples``); a reply without one valid triple is
  repaired once by the client, then the passage is ``failed`` with the step (``ner`` /
  ``triples``) and the failure kind. A failed passage has no triples (its passage node stays in
  the graph and is reached through its dense seed weight); it never raises.
* ``propositions`` (LLM-free, for corpora the local LLM cannot cover): triples from the
  EviReform proposition index: for every proposition, each pair of its canonical entities
  (in incidence order) gives (e₁, proposition text, e₂). A proposition with fewer than two
  entities gives no triple.

Tables: triples ``(triple_id, passage_id, subject, predicate, object, source, prop_id)`` with
``triple_id = "<passage_id>#t<ordinal>"``; status ``(passage_id, status, error_kind, error, step,
openie, entities, n_entities, n_triples, n_invalid_triples, n_duplicate_triples, prompt_tokens,
completion_tokens)``. Token counts are the responses' own (the same on a cache hit).
The index tables come as polars, or as pandas from the methods' context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from evichain.llm import LLMClient, LLMSuccess
from evichain.llm.types import quote_json, result_tokens
from evichain.methods.graph.prompts import NER, TRIPLES, ner_prompt, triples_prompt
from evichain.retrieval.incidence import order_propositions
from evichain.text.sentences import dedupe_ci

if TYPE_CHECKING:
    import pandas as pd

TRIPLE_COLUMNS = ["triple_id", "passage_id", "subject", "predicate", "object", "source", "prop_id"]
STATUS_COLUMNS = ["passage_id", "status", "error_kind", "error", "step", "openie", "entities",
                  "n_entities", "n_triples", "n_invalid_triples", "n_duplicate_triples",
                  "prompt_tokens", "completion_tokens"]
PROMPT_KEYS = (NER.key, TRIPLES.key)
Triple = tuple[str, str, str]


@dataclass
class PassageTriples:
    """Triples and the status row of one passage."""

    triples: list[dict[str, Any]] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)


def _text(value: Any) -> str | None:
    """A non-empty whitespace-collapsed string from a str / number, else None."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    text = " ".join(str(value).split())
    return text or None


def clean_entities(raw: Sequence[Any]) -> list[str]:
    """Named entities: strings (or numbers) only, whitespace collapsed, first occurrence kept
    case-insensitively."""
    return dedupe_ci(t for t in (_text(x) for x in raw) if t)


def clean_triples(raw: Sequence[Any]) -> tuple[list[Triple], int, int]:
    """Valid distinct triples, the number of malformed items (not a list of three non-empty
    strings / numbers) and of repeats (case-insensitive) that were dropped."""
    out: list[Triple] = []
    seen: set[tuple[str, ...]] = set()
    invalid = duplicates = 0
    for item in raw:
        parts = [_text(x) for x in item] if isinstance(item, (list, tuple)) and len(item) == 3 else []
        if len(parts) != 3 or any(p is None for p in parts):
            invalid += 1
            continue
        key = tuple(p.casefold() for p in parts)  # type: ignore[union-attr]
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        out.append((parts[0], parts[1], parts[2]))  # type: ignore[arg-type]
    return out, invalid, duplicates


def triples_check(value: Any) -> None:
    """Client check: at least one valid triple (else one repair, then a failure)."""
    if not clean_triples(value.triples)[0]:
        raise ValueError("no valid [subject, predicate, object] triple was returned")


def status_row(passage_id: str, openie: str, tokens: tuple[int, int] = (0, 0)) -> dict[str, Any]:
    """An ``ok`` status row with zero counts."""
    return {"passage_id": passage_id, "status": "ok", "error_kind": "", "error": "", "step": "",
            "openie": openie, "entities": [], "n_entities": 0, "n_triples": 0,
            "n_invalid_triples": 0, "n_duplicate_triples": 0,
            "prompt_tokens": tokens[0], "completion_tokens": tokens[1]}


def triple_rows(passage_id: str, triples: Sequence[Triple], source: str,
                prop_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Triple table rows of one passage, ordinal ids in order."""
    return [{"triple_id": f"{passage_id}#t{k}", "passage_id": passage_id, "subject": s,
             "predicate": p, "object": o, "source": source,
             "prop_id": prop_ids[k] if prop_ids is not None else ""}
            for k, (s, p, o) in enumerate(triples)]


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] + b[0], a[1] + b[1]


def llm_triples(client: LLMClient, passage_id: str, text: str) -> PassageTriples:
    """HippoRAG OpenIE for one passage: NER, then NER-conditioned triples (never raises)."""
    ner = client.call(ner_prompt(), data=quote_json(text))
    tokens = result_tokens(ner)
    if not isinstance(ner, LLMSuccess):
        return PassageTriples([], {**status_row(passage_id, "llm", tokens), **ner.status_row(),
                                   "step": "ner"})
    entities = clean_entities(ner.value.named_entities)
    rel = client.call(triples_prompt(), check=triples_check,
                      data={"paragraph": text, "named_entities": entities})
    tokens = _add(tokens, result_tokens(rel))
    status = {**status_row(passage_id, "llm", tokens), "entities": entities,
              "n_entities": len(entities)}
    if not isinstance(rel, LLMSuccess):
        return PassageTriples([], {**status, **rel.status_row(), "step": "triples"})
    triples, invalid, duplicates = clean_triples(rel.value.triples)
    status.update(n_triples=len(triples), n_invalid_triples=invalid, n_duplicate_triples=duplicates)
    return PassageTriples(triple_rows(passage_id, triples, "llm"), status)


# --------------------------------------------------------------------------- propositions
def proposition_triples(corpus: pl.DataFrame | pd.DataFrame, props: pl.DataFrame | pd.DataFrame,
                        entities: pl.DataFrame | pd.DataFrame,
                        incidence: pl.DataFrame | pd.DataFrame) -> list[PassageTriples]:
    """LLM-free triples (module docstring), one outcome per corpus passage in stored order."""
    passage_ids = corpus["passage_id"].to_list()
    props = order_propositions(props, passage_ids)
    names = dict(zip(entities["entity_id"].to_list(), entities["name"].to_list()))
    members: dict[str, list[str]] = {}
    for pid, eid in zip(incidence["prop_id"].to_list(), incidence["entity_id"].to_list()):
        members.setdefault(pid, [])
        if eid not in members[pid]:
            members[pid].append(eid)
    by_passage: dict[str, tuple[list[Triple], list[str], set[str]]] = {p: ([], [], set())
                                                                      for p in passage_ids}
    for prop_id, passage_id, text in zip(props["prop_id"].to_list(), props["passage_id"].to_list(),
                                         props["text"].to_list()):
        triples, sources, mentioned = by_passage[passage_id]
        ents = [names[e] for e in members.get(prop_id, []) if e in names]
        mentioned.update(ents)
        for i in range(len(ents)):
            for j in range(i + 1, len(ents)):
                triples.append((ents[i], " ".join(str(text).split()), ents[j]))
                sources.append(prop_id)
    return [_proposition_outcome(pid, *by_passage[pid]) for pid in passage_ids]


def _proposition_outcome(passage_id: str, triples: list[Triple], prop_ids: list[str],
                         mentioned: set[str]) -> PassageTriples:
    status = status_row(passage_id, "propositions")
    status.update(entities=sorted(mentioned), n_entities=len(mentioned), n_triples=len(triples))
    return PassageTriples(triple_rows(passage_id, triples, "propositions", prop_ids), status)


def openie_summary(status: pl.DataFrame, n_triples: int, openie: str) -> dict[str, Any]:
    """Counts for the stage summary: passages, ok / failed (``status == "failed"``),
    failure_rate = failed / passages to 4 places (0 without passages), failed passages per
    non-null ``step`` and ``error_kind``, triples, repaired items summed over passages,
    passages without triples and the token sums."""
    failed = status.filter(pl.col("status") == "failed")

    def counts(column: str) -> dict[str, int]:
        return {str(k): int(v) for k, v in failed.drop_nulls(column).group_by(column).len().iter_rows()}

    n = status.height
    return {"openie": openie, "passages": n, "ok": n - failed.height,
            "failed": failed.height,
            "failure_rate": round(failed.height / n, 4) if n else 0.0,
            "failed_steps": counts("step"), "failure_kinds": counts("error_kind"),
            "triples": n_triples,
            "invalid_triples_dropped": int(status["n_invalid_triples"].sum()),
            "duplicate_triples_dropped": int(status["n_duplicate_triples"].sum()),
            "passages_without_triples": int((status["n_triples"] == 0).sum()),
            "prompt_tokens": int(status["prompt_tokens"].sum()),
            "completion_tokens": int(status["completion_tokens"].sum())}


def triple_tables(outcomes: Sequence[PassageTriples]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The triple and status tables of ``outcomes`` (in their order), columns
    :data:`TRIPLE_COLUMNS` / :data:`STATUS_COLUMNS`. Types are inferred from every row as pandas
    infers them (a column of empty lists only is ``List(Null)``; no rows: ``Null`` columns), so
    the Parquet bytes are those of the pandas build."""
    triples = pl.from_dicts([t for o in outcomes for t in o.triples], schema=TRIPLE_COLUMNS,
                            infer_schema_length=None)
    status = pl.from_dicts([o.status for o in outcomes], schema=STATUS_COLUMNS,
                           infer_schema_length=None)
    return triples, status
