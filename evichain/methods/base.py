"""One contract for every retrieval method: :class:`Method`, :class:`Retriever`,
:class:`QuestionResult` and the method registry.

A method is one package plus one params block::

    from evichain.methods.base import BuildContext, Method, QuestionResult, register
    from evichain.params_base import Section

    class ToyParams(Section):
        top_k: int = 5

    @register
    class Toy(Method):
        name = "toy"
        Params = ToyParams          # validates the ``toy:`` block of params.yaml
        params_key = "toy"

        def build(self, ctx, variant=None, index=None):
            p = self.params_of(ctx.params)
            return FunctionRetriever(lambda qid, q: QuestionResult(...))

Registering records the params block (:func:`evichain.params_base.register_block`), so
:func:`evichain.config.load_params` accepts ``toy:`` once the package is imported; the block is
``params.block("toy")``. The built-in methods are listed, with the module that registers each,
in the catalogue :mod:`evichain.methods.catalogue`: :func:`get_method` imports only the module
of the method it is asked for (a stage running one method loads that method's code and no
other's), :func:`methods` imports them all.

Per question a method returns a :class:`QuestionResult`: run rows ``(question_id, rank,
passage_id, score)``, one trace row (LLM usage: ``prompt_tokens``/``completion_tokens`` and
the method's status fields), the timings in seconds where the method measures them, and the
evidence rows of the iterative methods. ``build`` adapts each family's retriever classes to the
one :meth:`Retriever.retrieve` signature; :mod:`flows.method` runs every method this way, for
``dvc repro`` and ``evichain run`` alike.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from evichain.methods.catalogue import BLOCK_MODULES, METHOD_FAMILIES, METHOD_MODULES
from evichain.params_base import register_block, unregister_block

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl

    from evichain.config import Params
    from evichain.llm import LLMClient
    from evichain.llm.params import LLMParams

PROPOSITION_TABLES: tuple[str, ...] = ("propositions", "entities", "incidence")
"""The proposition–entity index tables (EviReform's index; PropRAG, GeAR and the hybrid read it)."""


@dataclass(frozen=True)
class IndexSource:
    """An index input a method reads besides the passages: the tables it puts in
    ``BuildContext.tables``, the stage that writes them, and whether an LLM builds them.

    ``llm``: True (an LLM always builds the tables), False (never), or the dotted params
    setting whose value ``llm`` means an LLM builds them (``evireform.index.extractor``);
    ``by_dataset``: the dotted setting holding that setting's per-dataset overrides."""

    label: str
    tables: tuple[str, ...]
    stage: str
    llm: bool | str
    by_dataset: str = ""

    def describe(self) -> str:
        """``label (stage)``, e.g. ``propositions (extract_propositions)``."""
        return f"{self.label} ({self.stage})"

    @staticmethod
    def _setting(params: Params, dotted: str) -> Any:
        """The value of the dotted setting ``block.key...`` of ``params``."""
        head, *rest = dotted.split(".")
        value: Any = params.block(head)
        for part in rest:
            value = getattr(value, part)
        return value

    def built_by_llm(self, params: Params) -> bool:
        """Whether an LLM builds the tables under ``params`` (its setting as written, before
        per-dataset overrides)."""
        if isinstance(self.llm, bool):
            return self.llm
        return bool(self._setting(params, self.llm) == "llm")

    def dataset_overrides(self, params: Params) -> dict[str, str]:
        """Datasets whose override of the setting changes who builds the tables: dataset → the
        overriding value (empty for a source without a per-dataset setting)."""
        if not self.by_dataset:
            return {}
        default = self.built_by_llm(params)
        overrides = self._setting(params, self.by_dataset)
        return {str(d): str(v) for d, v in sorted(overrides.items()) if (v == "llm") != default}

    def llm_column(self, params: Params) -> str:
        """``yes`` / ``no`` (an LLM builds the tables), ``per dataset`` where overrides differ."""
        if self.dataset_overrides(params):
            return "per dataset"
        return "yes" if self.built_by_llm(params) else "no"

    def llm_note(self, params: Params) -> str:
        """Who builds the tables under ``params``: ``an LLM`` / ``no LLM``, with the setting and
        its overrides, e.g. ``an LLM (evireform.index.extractor: llm; sentences on musique)``."""
        who = "an LLM" if self.built_by_llm(params) else "no LLM"
        if isinstance(self.llm, bool):
            return who
        others = self.dataset_overrides(params)
        extra = "".join(f"; {v} on {', '.join(d for d in others if others[d] == v)}"
                        for v in sorted(set(others.values())))
        return f"{who} ({self.llm}: {self._setting(params, self.llm)}{extra})"


PROPOSITION_INDEX = IndexSource("propositions", PROPOSITION_TABLES,
                                "extract_propositions",
                                "evireform.index.extractor", "evireform.index.extractor_by_dataset")
"""The proposition–entity index: LLM or sentence extractor per ``evireform.index``."""
TRIPLE_INDEX = IndexSource("triples", ("triples",), "extract_triples", "graph.openie",
                           "graph.openie_by_dataset")
"""HippoRAG 2's OpenIE triples, read when ``graph.openie: llm`` (an LLM extracts them; a
dataset overridden to ``propositions`` reads the proposition index instead)."""
FACET_INDEX = IndexSource("CEE facets", ("facets",), "generate_facets", "cee.facets.source")
"""CEE's facet table, read when ``cee.facets.source: llm`` (an LLM writes the facet queries)."""
DENSE_RUN_INDEX = IndexSource("first-stage run", ("runs/dense",), "retrieve_dense", False)
"""The dense run a reranker cuts its pools from."""
BUILTIN_INDEX_SOURCES: tuple[IndexSource, ...] = (PROPOSITION_INDEX, TRIPLE_INDEX, FACET_INDEX,
                                                  DENSE_RUN_INDEX)
"""The index inputs the built-in stages write (a method that reads one of their tables without
declaring it, e.g. a fusion of methods, is resolved against these)."""

Row = tuple[str, int, str, float]
"""A run row: (question_id, rank from 1, passage_id, score)."""


@dataclass
class QuestionResult:
    """What one question contributes to a method's stage outputs (every method, one type).

    ``rows``: the ranking as run rows, best first; ``trace``: the method's trace row (LLM
    usage and status fields); ``seconds``: timings (``compute``, ``llm``, ``encode``, ...) where
    the method measures them; ``evidence``: evidence rows (iterative methods: the passages the
    reader gets, in reading order).
    """

    rows: list[Row]
    trace: dict[str, Any]
    seconds: dict[str, float] = field(default_factory=dict)
    evidence: list[dict[str, Any]] = field(default_factory=list)

    @property
    def run(self) -> list[Row]:
        """The run rows (the iterative methods' name for ``rows``)."""
        return self.rows

    @property
    def passage_ids(self) -> list[str]:
        """Ranked passage ids, best first."""
        return [r[2] for r in self.rows]

    @property
    def scores(self) -> list[float]:
        """Scores of :attr:`passage_ids`."""
        return [float(r[3]) for r in self.rows]

    @property
    def usage(self) -> dict[str, int]:
        """LLM tokens of the question, from the trace row: its ``prompt_tokens`` /
        ``completion_tokens``, else the sum of its per-step ``<step>_prompt_tokens`` /
        ``<step>_completion_tokens`` (EviReform); 0 where the method calls no LLM."""
        out = {}
        for key in ("prompt_tokens", "completion_tokens"):
            if key in self.trace:
                out[key] = int(self.trace[key] or 0)
            else:
                out[key] = sum(int(v or 0) for k, v in self.trace.items() if k.endswith(f"_{key}"))
        return out


Outcome = QuestionResult
"""The name the expansion and iterative families use for :class:`QuestionResult`."""


@runtime_checkable
class Retriever(Protocol):
    """A built method: one question at a time (thread-safe where the method is)."""

    def retrieve(self, question_id: str, question: str) -> QuestionResult: ...


class FunctionRetriever:
    """A :class:`Retriever` around ``fn(question_id, question) -> QuestionResult``; ``inner`` is
    the wrapped family retriever, for callers that need it."""

    def __init__(self, fn: Callable[[str, str], QuestionResult], inner: Any = None) -> None:
        self._fn = fn
        self.inner = inner

    def retrieve(self, question_id: str, question: str) -> QuestionResult:
        return self._fn(question_id, question)


Encoder = Callable[[Sequence[str]], Any]
"""Texts → L2-normalised embedding rows (a numpy array)."""


@dataclass
class BuildContext:
    """What ``build`` gets: one dataset's corpus, the whole params, the services.

    Tables are polars. ``corpus``: ``passage_id, title, text`` in stored order; ``params``: the validated
    :class:`evichain.config.Params` (service blocks ``llm``, ``embed``, ``retrieval`` and every
    method's block); ``encode``: the embedding service (texts → L2-normalised rows);
    ``make_client``: LLM client factory (default :class:`evichain.llm.LLMClient`); ``tables``:
    the dataset's shared index tables by name (``propositions``, ``entities``, ``incidence``,
    ``triples``, ``facets``), as the index stages write them; ``gold``: question id → gold
    passage ids, for trace diagnostics only (never used to rank); ``questions``: the questions
    the run will retrieve (``question_id, question``), for methods whose offline step prepares
    something per question in bulk (the rerankers' first-stage pools), else None.
    """

    corpus: pl.DataFrame
    params: Params
    encode: Encoder | None = None
    make_client: Callable[[LLMParams], LLMClient] | None = None
    tables: Mapping[str, pl.DataFrame] = field(default_factory=dict)
    gold: Mapping[str, Sequence[str]] = field(default_factory=dict)
    questions: pl.DataFrame | None = None

    def client(self, llm: LLMParams | None = None) -> LLMClient:
        """An LLM client for ``llm`` (default: ``params.llm``)."""
        llm = llm if llm is not None else self.params.llm
        if self.make_client is not None:
            return self.make_client(llm)
        from evichain.llm import LLMClient

        return LLMClient(llm)

    def encoder(self) -> Encoder:
        """The embedding function (default: the ``embed`` service of ``params``)."""
        if self.encode is None:
            from evichain.embed import get_embedder

            self.encode = get_embedder(self.params.embed).encode
        return self.encode

    def table(self, name: str) -> pl.DataFrame:
        """Index table ``name``, or a KeyError naming the tables the method needs."""
        if name not in self.tables:
            raise KeyError(f"index table {name!r} missing from BuildContext.tables "
                           f"(have {sorted(self.tables)}); build the dataset's index first")
        return self.tables[name]

    def gold_of(self, question_id: str) -> list[str]:
        return [str(g) for g in self.gold.get(question_id, ())]


class Method(ABC):
    """A retrieval method: its name, params block, variants, optional index step, and
    :meth:`build`.

    ``Params``: the pydantic model of the method's params block; ``params_key``: where that
    block sits in ``params.yaml`` (dotted for nested blocks: ``retrieval.bm25``); ``variants``:
    the named variants ``build`` accepts (``None`` = :attr:`default_variant`); ``uses_llm``:
    whether ``build`` makes an LLM client (for some variants at least); ``index_sources``: every
    index input (:class:`IndexSource`) the method may read besides the passages, whichever
    variant and params (:meth:`tables` says which it reads under given params).
    """

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    params_key: ClassVar[str]
    variants: ClassVar[tuple[str, ...]] = ("default",)
    default_variant: ClassVar[str | None] = None
    uses_llm: ClassVar[bool] = False
    index_sources: ClassVar[tuple[IndexSource, ...]] = ()

    @property
    def family(self) -> str:
        """The family whose conventions name the method's stage outputs (``evireform``, ``cee``,
        ``graph``, ``expansion``, ``iterative``, ``rerank``, ...), from the catalogue
        (:data:`evichain.methods.catalogue.METHOD_FAMILIES`); ``registered`` for a plug-in."""
        return METHOD_FAMILIES.get(self.name, "registered")

    def params_of(self, params: Params) -> Any:
        """The method's params block of ``params``."""
        return params.block(self.params_key)

    def check_variant(self, variant: str | None) -> str:
        """``variant`` (or the default), or a ValueError listing the known variants."""
        chosen = variant if variant is not None else (self.default_variant or self.variants[0])
        if chosen not in self.variants:
            raise ValueError(f"method {self.name!r} has no variant {chosen!r}; "
                             f"known: {list(self.variants)}")
        return chosen

    def tables(self, params: Params, variant: str | None = None) -> tuple[str, ...]:
        """Names of the index tables :meth:`build` reads from ``ctx.tables`` for ``variant``
        (the index stages write them: ``propositions``, ``entities`` and ``incidence`` by
        ``extract_propositions`` + ``canonicalize_entities``, ``triples`` by ``extract_triples``,
        ``facets`` by ``generate_facets``). None by default."""
        return ()

    def sources(self, params: Params, variant: str | None = None) -> tuple[IndexSource, ...]:
        """The index sources whose tables :meth:`tables` reads for ``variant`` under ``params``:
        the method's :attr:`index_sources`, then :data:`BUILTIN_INDEX_SOURCES` (empty: the
        passages only); a ValueError names a table no source writes."""
        read = set(self.tables(params, variant))
        chosen: list[IndexSource] = []
        for source in (*self.index_sources, *BUILTIN_INDEX_SOURCES):
            if read & set(source.tables) - {t for s in chosen for t in s.tables}:
                chosen.append(source)
        unknown = read - {t for s in chosen for t in s.tables}
        if unknown:
            raise ValueError(f"method {self.name!r} reads {sorted(unknown)}, which no index source "
                             "writes; declare the source in its index_sources")
        return tuple(chosen)

    def calls_llm(self, params: Params, variant: str | None = None) -> bool:
        """Whether retrieval with ``variant`` under ``params`` calls an LLM at query time
        (default: :attr:`uses_llm`; methods whose LLM steps are switches refine it)."""
        self.check_variant(variant)
        return self.uses_llm

    def index(self, ctx: BuildContext, variant: str | None = None) -> Any:
        """The offline step: method structures built from the corpus and ``ctx.tables``
        (encoded passages, graphs, banks). None for methods without one."""
        return None

    @abstractmethod
    def build(self, ctx: BuildContext, variant: str | None = None, index: Any = None) -> Retriever:
        """A :class:`Retriever` for ``variant`` over ``ctx`` (``index``: a result of
        :meth:`index` to reuse; built here when None)."""

    def compute_limits(self) -> contextlib.AbstractContextManager[Any]:
        """A context the per-question work runs in (default: none). EviReform limits BLAS to
        one thread per question task, since the tasks already run in parallel."""
        return contextlib.nullcontext()

    def label(self, variant: str | None = None) -> str:
        """The run's name in progress lines and task names: ``name`` or ``name-variant``."""
        chosen = self.check_variant(variant)
        return self.name if chosen == "default" else f"{self.name}-{chosen}"

    def run_name(self, variant: str | None = None) -> str:
        """The name of the run (and trace) table of ``variant``: :meth:`label` by default."""
        return self.label(variant)

    def summary(self, params: Params, variant: str | None, trace: pd.DataFrame,
                results: Sequence[QuestionResult], index: Any) -> dict[str, Any]:
        """The method's own counts for the stage summary (statuses, fallbacks, repairs, index
        statistics), from the trace table (one row per question), the results and the index
        :meth:`build` used. None by default; the flow adds LLM usage and latency."""
        return {}

    def evidence_table(self, results: Sequence[QuestionResult]) -> pl.DataFrame | None:
        """The evidence rows of every question (methods that keep their own reading context),
        else None."""
        return None

    def __repr__(self) -> str:
        return f"<Method {self.name} params={self.params_key} variants={list(self.variants)}>"


# --------------------------------------------------------------------------- registry
M = TypeVar("M", bound=Method)

BUILTIN_MODULES: tuple[str, ...] = tuple(dict.fromkeys(METHOD_MODULES.values()))
"""Modules whose import registers the built-in methods (the catalogue's, in its order)."""

_REGISTRY: dict[str, Method] = {}
_LOCK = threading.RLock()
_BUILTINS_LOADED = False  # every built-in and plugin module imported (by methods())


class UnknownMethodError(LookupError):
    """:func:`get_method` of a name nobody registered."""


def register(method: type[M]) -> type[M]:
    """Register a :class:`Method` subclass (an instance is created once); usable as a class
    decorator. Its top-level params block is accepted by :func:`evichain.config.load_params`
    from now on. Registering another class under a taken name is an error."""
    if not (isinstance(method, type) and issubclass(method, Method)):
        raise TypeError(f"register() takes a Method subclass, got {method!r}")
    for attr in ("name", "Params", "params_key"):
        if not hasattr(method, attr):
            raise TypeError(f"{method.__name__} must define {attr!r}")
    if not (isinstance(method.Params, type) and issubclass(method.Params, BaseModel)):
        raise TypeError(f"{method.__name__}.Params must be a pydantic model")
    with _LOCK:
        taken = _REGISTRY.get(method.name)
        if taken is not None and type(taken) is not method:
            if (type(taken).__module__, type(taken).__qualname__) != (method.__module__,
                                                                      method.__qualname__):
                raise ValueError(f"method {method.name!r} is already registered by "
                                 f"{type(taken).__module__}.{type(taken).__qualname__}")
        if "." not in method.params_key:
            register_block(method.params_key, method.Params)
        _REGISTRY[method.name] = method()
    return method


def unregister(name: str) -> None:
    """Forget method ``name`` and its params block if no other method uses it and the
    catalogue does not list it (tests)."""
    with _LOCK:
        gone = _REGISTRY.pop(name, None)
        if gone is not None and "." not in gone.params_key and gone.params_key not in BLOCK_MODULES \
                and not any(m.params_key == gone.params_key for m in _REGISTRY.values()):
            unregister_block(gone.params_key)


def plugin_modules() -> list[str]:
    """Modules named by ``$EVICHAIN_METHODS`` (comma-separated, importable): methods kept
    outside this repository register themselves when :func:`get_method` looks for a name the
    catalogue does not list, or when :func:`methods` first runs."""
    return [m.strip() for m in os.environ.get("EVICHAIN_METHODS", "").split(",") if m.strip()]


def _import_plugins() -> None:
    for module in plugin_modules():
        importlib.import_module(module)


def _load_builtins() -> None:
    """Import every built-in method module and every plugin module (once)."""
    global _BUILTINS_LOADED
    if _BUILTINS_LOADED:
        return
    with _LOCK:
        if not _BUILTINS_LOADED:
            for module in BUILTIN_MODULES:
                importlib.import_module(module)
            _import_plugins()
            _BUILTINS_LOADED = True


def known_names() -> list[str]:
    """Names :func:`get_method` accepts now: the catalogue's and every registered one (sorted)."""
    with _LOCK:
        return sorted({*METHOD_MODULES, *_REGISTRY})


def get_method(name: str) -> Method:
    """The registered method ``name``, or :class:`UnknownMethodError` listing the known names.

    A built-in method's module (:data:`~evichain.methods.catalogue.METHOD_MODULES`) is imported
    by name, and only that one; a name the catalogue does not list is looked for in the plugin
    modules (:func:`plugin_modules`)."""
    with _LOCK:
        found = _REGISTRY.get(name)
        if found is None:
            module = METHOD_MODULES.get(name)
            if module is not None:
                importlib.import_module(module)
                found = _REGISTRY.get(name)
                if found is None:
                    raise UnknownMethodError(
                        f"method {name!r}: {module} (evichain/methods/catalogue.py) did not "
                        "register it")
            else:
                _import_plugins()
                found = _REGISTRY.get(name)
    if found is None:
        raise UnknownMethodError(f"unknown method {name!r}; known: {known_names()}")
    return found


def methods() -> dict[str, Method]:
    """Every registered method by name (built-ins and plugins, all imported), sorted by name."""
    _load_builtins()
    with _LOCK:
        return dict(sorted(_REGISTRY.items()))


# --------------------------------------------------------------------------- helpers
def latency_ms(results: Sequence[QuestionResult], key: str) -> dict[str, float]:
    """p50 / p95 / mean milliseconds of timing ``key`` (seconds in each result's ``seconds``;
    0 where a result lacks it; all 0 for no results)."""
    import numpy as np

    ms = np.array([r.seconds.get(key, 0.0) * 1000.0 for r in results]) if results else np.zeros(1)
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3),
            "p95_ms": round(float(np.percentile(ms, 95)), 3), "mean_ms": round(float(ms.mean()), 3)}


def run_frame(results: Sequence[QuestionResult]) -> pd.DataFrame:
    """The run table (``question_id, rank, passage_id, score``) of every question's rows."""
    from evichain.retrieval.run import run_table

    return run_table([row for r in results for row in r.rows])


def pandas_boundary(table: pl.DataFrame) -> pd.DataFrame:
    """``table`` for an index function that still takes pandas: through Arrow, the frame
    :func:`evichain.io.read_parquet` gives for the same file (string columns as ``str``, list
    columns as arrays). Callers mark the call ``# boundary: <module> still pandas``."""
    return table.to_pandas()


def rows_of(run: pd.DataFrame) -> list[Row]:
    """Run rows of a run table (``question_id, rank, passage_id, score``)."""
    return [(str(q), int(r), str(p), float(s))
            for q, r, p, s in zip(run["question_id"], run["rank"], run["passage_id"], run["score"])]
