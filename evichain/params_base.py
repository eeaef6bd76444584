"""The base of every params section, shared by :mod:`evichain.config` and the params modules
that live beside their service or method (``evichain/llm/params.py``,
``evichain/methods/<family>/params.py``, ...).

This module imports nothing from evichain, so a params module never needs
:mod:`evichain.config` and config composes the params modules without an import cycle.

Every method's params block is recorded here with :func:`register_block`: a built-in method's
params module registers its block when it is imported (the catalogue
:mod:`evichain.methods.catalogue` names the module), a method added later through
:func:`evichain.methods.base.register`. :func:`evichain.config.parse_params` validates a
block found at the top level of ``params.yaml`` with its registered model, so a method needs no
edit of config.py. A method that owns the valid values of a top-level list of ``Params``
(``evireform_variants``) checks it with :func:`register_check`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

DATASETS: tuple[str, ...] = ("demo", "2wiki", "musique", "hotpotqa", "medical",
                             "2wiki_s", "hotpotqa_s", "medical_s", "2wiki_tune_s", "musique_llm")
"""Full benchmarks, the bundled demo, and question samples of full benchmarks (``*_s``).
``2wiki_tune_s`` is the tuning sample: 2Wiki questions outside every reported sample.
``musique_llm`` holds MuSiQue-100's questions and corpus again, for the indexes its methods'
papers build with the LLM (issue 62), beside ``musique``'s LLM-free ones."""

SAMPLE_DATASETS: tuple[str, ...] = tuple(d for d in DATASETS if d.endswith("_s")) + ("musique_llm",)
"""Datasets built by :mod:`evichain.data.sample` from a full benchmark (``data.samples``)."""


UnitInterval = Annotated[float, Field(ge=0.0, le=1.0)]
"""A float in the closed interval [0, 1] (a rate, share, weight or cosine threshold):
``max_failure_rate: UnitInterval = 0.05`` validates as ``Field(0.05, ge=0.0, le=1.0)``."""

OpenUnitInterval = Annotated[float, Field(gt=0.0, lt=1.0)]
"""A float in the open interval (0, 1) (a PageRank damping factor):
``damping: OpenUnitInterval = 0.5`` validates as ``Field(0.5, gt=0.0, lt=1.0)``."""


class ParamsError(ValueError):
    """A params file that cannot be used; the message names the file and key."""


class Section(BaseModel):
    """Base of every params section: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def only_known(values: list[str], known: list[str], what: str) -> list[str]:
    """``values`` unchanged, or a ValueError naming the unknown ones and the known choices."""
    unknown = [name for name in values if name not in known]
    if unknown:
        raise ValueError(f"unknown {what}(s) {unknown}; known: {known}")
    return values


_Names = TypeVar("_Names", bound=Iterable[str])


def known_names(field: str, known: Sequence[str], what: str) -> Any:
    """A pydantic field validator (assign it in a model's body) that checks the names of
    ``field``, a list of names or a dict keyed by name, against ``known``.

    The value passes unchanged; an unknown name fails with :func:`only_known`'s message,
    ``unknown <what>(s) [...]; known: [...]``. Example::

        _known_datasets = known_names("datasets", DATASETS, "dataset")
    """
    choices = list(known)

    def check(value: _Names) -> _Names:
        only_known(list(value), choices, what)
        return value

    return field_validator(field)(check)


_BLOCKS: dict[str, type[BaseModel]] = {}


def register_block(key: str, model: type[BaseModel]) -> None:
    """Accept a top-level ``params.yaml`` block ``key`` validated by ``model``.

    Registering the same model twice is a no-op; another model under a taken key is an error.
    Keys that are fields of :class:`evichain.config.Params` are validated by that field.
    """
    if not key.isidentifier():
        raise ValueError(f"params block key {key!r} must be an identifier")
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"params block {key!r}: {model!r} is not a pydantic model")
    taken = _BLOCKS.get(key)
    if taken is not None and taken is not model:
        raise ValueError(f"params block {key!r} is already registered with {taken.__name__}")
    _BLOCKS[key] = model


def unregister_block(key: str) -> None:
    """Forget block ``key`` (tests)."""
    _BLOCKS.pop(key, None)


def registered_blocks() -> Mapping[str, type[BaseModel]]:
    """The registered blocks, key → model (read-only view)."""
    return MappingProxyType(_BLOCKS)


_CHECKS: dict[tuple[str, str], Callable[[Any], Any]] = {}


def register_check(block: str, field: str, check: Callable[[Any], Any]) -> None:
    """Check top-level field ``field`` of ``params.yaml`` with ``check`` (value → value, or a
    ValueError saying what is wrong) whenever params are validated.

    For the fields of :class:`evichain.config.Params` whose valid values a method knows
    (``evireform_variants``): the method's params module (``block``'s) registers the check, so
    config.py needs nothing of the method. Registering again under ``(block, field)`` replaces.
    """
    _CHECKS[(block, field)] = check


def registered_checks() -> dict[str, list[Callable[[Any], Any]]]:
    """The registered checks, field → checks (in registration order)."""
    out: dict[str, list[Callable[[Any], Any]]] = {}
    for (_, field), check in _CHECKS.items():
        out.setdefault(field, []).append(check)
    return out


def error_details(exc: Any, prefix: tuple[str | int, ...]) -> list[dict[str, Any]]:
    """``exc``'s (a pydantic ValidationError) errors with ``prefix`` prepended to each location,
    in the form ``ValidationError.from_exception_data`` takes."""
    out = []
    for err in exc.errors():
        detail: dict[str, Any] = {"type": err["type"], "loc": (*prefix, *err["loc"]),
                                  "input": err.get("input")}
        if "ctx" in err:
            detail["ctx"] = err["ctx"]
        out.append(detail)
    return out
