"""Prompt construction and narrowing shared by every method's structured calls.

:func:`data_prompt` builds the project's usual prompt: instructions as the system message, the
data as one JSON value in the user message (``$data``). :func:`narrowed` returns a :class:`NarrowedPrompt`: the JSON schema *sent* to the model
constrains a list field (an ``enum`` of the valid ids, ``maxItems``), while replies are
validated with the prompt's base schema, so that invalid ids can be dropped and counted instead
of failing the whole call.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from evichain.llm.types import Prompt

T = TypeVar("T")

DATA_USER = "$data"
"""The user template of a data prompt: the whole user message is the ``data`` variable."""


def data_prompt(name: str, system: str, schema: type[T], *, version: str = "1") -> Prompt[T]:
    """The prompt ``name@version`` whose system message is ``system`` (sent verbatim) and whose
    user message is the data block alone (:data:`DATA_USER`), replies validated by ``schema``.

    Same object as ``Prompt(name=name, version=version, system=system, user="$data",
    schema=schema)``: the name, version and texts are the LLM cache key, so building a prompt
    through this function changes no recorded answer.
    """
    return Prompt(name=name, version=version, system=system, user=DATA_USER, schema=schema)


@dataclasses.dataclass(frozen=True)
class NarrowedPrompt(Prompt[Any]):
    """A prompt whose sent JSON schema (:meth:`json_schema`) is narrower than the schema its
    replies are validated with (``schema``)."""

    sent_schema: str = "{}"

    def json_schema(self) -> dict[str, Any]:
        return json.loads(self.sent_schema)


@functools.lru_cache(maxsize=64)
def _base_schema(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema(), sort_keys=True)


def with_sent_schema(prompt: Prompt[Any], schema: dict[str, Any], system: str | None = None
                     ) -> Prompt[Any]:
    """``prompt`` sending ``schema`` (serialised with sorted keys) as its JSON schema, optionally
    with another ``system`` message; replies are still validated by ``prompt.schema``."""
    return NarrowedPrompt(name=prompt.name, version=prompt.version,
                          system=prompt.system if system is None else system, user=prompt.user,
                          schema=prompt.schema, sent_schema=json.dumps(schema, sort_keys=True))


def narrowed(prompt: Prompt[Any], field: str, *, enum: Sequence[int] | None = None,
             max_items: int | None = None) -> Prompt[Any]:
    """``prompt`` whose sent JSON schema constrains list ``field`` (ids enum, maxItems).

    Validation of a reply stays that of the base schema (list of ints / strings), so that
    invalid ids can be dropped and counted instead of failing the whole call.
    """
    schema = json.loads(_base_schema(prompt.schema))
    prop = schema["properties"][field]
    if enum is not None:
        prop["items"] = {"type": "integer", "enum": [int(i) for i in enum]}
    if max_items is not None:
        prop["maxItems"] = int(max_items)
    return with_sent_schema(prompt, schema)
