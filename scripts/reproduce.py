"""Expected scores, pyserini-2CR style: re-run fixed samples and compare with a recorded file.

``reproduce/expected_scores.yaml`` lists, per (dataset, method), the scores a run of this
pipeline must give on a fixed sample, with a tolerance:

* deterministic methods (BM25 on the first 50 questions of every benchmark with gold, the
  whole corpus; dense on the demo): tolerance 1e-6 (rounding of the metrics JSON);
* LLM methods (EviReform base/full, the shared reader) on the demo: replayed from the LLM
  cache recorded when the file was written (``reproduce/demo-llm-cache.sqlite``, a copy of the
  cache of ``make demo``) with ``EVICHAIN_LLM_REPLAY=1``: no model is needed and a call the
  cache cannot answer fails as ``replay_miss`` (e.g. after a prompt change: re-record). The
  tolerance band stated per entry is what a live re-run with the same model may move;
* EviReform base/full, the paper's residual-only and repeat-question controls and
  robust/hybrid on the first 50 questions of ``2wiki_s`` and ``hotpotqa_s`` and on MuSiQue-100
  (sentence extractor), replayed from the selection and reformulation answers of
  the recorded 100-question runs (``reproduce/2wiki_s-llm-cache.sqlite``,
  ``reproduce/musique-evireform-llm-cache.sqlite``,
  ``reproduce/hotpotqa_s-evireform-llm-cache.sqlite``, merged into the scratch cache);
* the shared reader's EM/F1 there (direct inference, and the reader over evireform-full's and
  evireform-robust's top 5), replayed from ``reproduce/qa-llm-cache.sqlite``;
* PropRAG (LLM-free) on the first 50 questions of ``2wiki_s`` and ``hotpotqa_s`` and on
  MuSiQue-100: tolerance
  0.005 (its beam search ranks re-encoded path texts; float differences of another CPU's
  kernels may swap near-ties); ``evireform-fused`` (ours: robust ⊕ PropRAG, the ``fuse``
  stage) there with the same tolerance, and the reader over PropRAG's and the fused top 5
  (not on ``hotpotqa_s``, where no reader answers are recorded);
* the LLM baselines (issue 40) on the first 50 questions of ``2wiki_s`` and on MuSiQue-100,
  replayed from the answers of their recorded 100-question runs
  (``reproduce/<dataset>-<run>-llm-cache.sqlite``, merged into the scratch cache; tolerance
  :data:`LLM_BAND`): IRCoT, Self-Ask, S2G-RAG (``retrieve_iterative``), listwise reranking of
  the dense top 40 (``rerank-listwise``, ``retrieve_rerank``), HippoRAG 2 and CatRAG
  (``retrieve_graph``, over the LLM-free ``extract_triples`` index of the propositions) on both,
  GeAR (``retrieve_iterative_graph``), query2doc, HyDE and LameR
  (``retrieve_expansion``, recorded 2026-12-06; HyDE's 8 and LameR's 5 samples per question, at
  temperature 0.7 with one seed each, are cache entries like any other answer).
  HippoRAG 2 on MuSiQue has no file of its own: its one LLM step (the recognition-memory filter,
  ``graph.hipporag2.recognition_memory``) sends exactly CatRAG's filter prompts, whose answers
  ``reproduce/musique-catrag-llm-cache.sqlite`` holds (as the 100 filter answers of
  ``2wiki_s-hipporag2`` are ``2wiki_s-catrag``'s). A CatRAG replay fails one request per
  scoring batch its live run split (the halves' answers are recorded, never the overflowing
  batch's: ``evichain.methods.graph.catrag``); each baseline prints its replay counts;
* CEE full, its three ablations (issue 40) and ``robust`` (ours, issue 38) on MuSiQue-100
  and the whole ``2wiki_s`` (100 questions, not 50: :data:`WHOLE_SAMPLE_GROUPS`, in a scratch
  directory of their own): the facet index (``generate_facets``, restricted as in the recorded
  run) and the exploration replayed from ``reproduce/<dataset>-cee-llm-cache.sqlite`` (the facet
  answers and the full run's probe and summary answers; the ablations make a subset of full's
  calls; robust's bridge pool expansion, sentence facets and normalised coverage change no
  prompt, so it makes exactly full's calls). A summary that failed in the
  recorded run fails again as a replay miss (failures are never cached), which stops that
  question's exploration as it did live (``summary_failed``); and the shared reader over CEE
  full's and CEE robust's top 5 there (``qa-cee-full``, ``qa-cee-robust``, from
  ``reproduce/qa-llm-cache.sqlite``, in this group);
  and ``robust`` alone on the whole ``hotpotqa_s``, which has no LLM facet index (robust's
  sentence facets need none), from ``reproduce/hotpotqa_s-cee-llm-cache.sqlite``.

Entries belong to groups (:data:`GROUPS`, :func:`group_of`): ``deterministic`` (BM25, dense),
``evireform``, ``proprag`` (PropRAG and evireform-fused), ``qa`` (the reader), ``baselines``
and ``cee``.
``--only`` runs just the stages a subset of groups needs and checks only its entries.

The run uses the real stage entry points in-process, in a scratch directory.

    python -m scripts.reproduce            # check; exit 1 with a table of differences
    python -m scripts.reproduce --write    # re-record the expected scores (after a deliberate change)
    python -m scripts.reproduce --add      # record new entries only if every recorded one reproduces
    python -m scripts.reproduce --only baselines[,qa] [--add|--write]   # just these groups
    python -m scripts.reproduce --only cee --add                         # CEE (~minutes)
    python -m scripts.reproduce --only baselines --runs query2doc --add  # one run's entries
    python -m scripts.reproduce --only evireform --datasets hotpotqa_s   # one dataset's entries

``--runs NAME[,NAME]`` narrows the chosen groups to the named runs (``runs/<name>.parquet``;
the reader over a run, ``qa-<name>``, goes with it): only their stages run and only their
entries are checked or added. ``--datasets DS[,DS]`` narrows them the same way to the named
datasets (e.g. ``--only evireform,proprag --datasets hotpotqa_s --add`` after a new
recording there). Neither can be combined with ``--write``, which rewrites whole groups.
``--help`` prints this text.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = ROOT / "reproduce" / "expected_scores.yaml"
RECORDED_CACHE = ROOT / "reproduce" / "demo-llm-cache.sqlite"
EXTRA_CACHES = (ROOT / "reproduce" / "2wiki_s-llm-cache.sqlite",  # merged into the scratch cache
                ROOT / "reproduce" / "musique-evireform-llm-cache.sqlite",
                ROOT / "reproduce" / "hotpotqa_s-evireform-llm-cache.sqlite",
                ROOT / "reproduce" / "qa-llm-cache.sqlite")
SAMPLE_QUESTIONS = 50
METRICS = ("Recall@2", "Recall@5", "Recall@10", "Chain@5", "nDCG@10")
QA_METRICS = ("EM", "F1")
BM25_DATASETS = ("demo", "2wiki_s", "musique", "hotpotqa_s")
LLM_BAND = 0.10  # a live re-run (no recorded cache) with the same model may move this much
PROPRAG_BAND = 0.005
# EviReform variants replayed from recorded answers (hotpotqa_s: full's answers recorded 2026-12-07)
EVIREFORM_DATASETS = ("demo", "2wiki_s", "musique", "hotpotqa_s")
QA_DATASETS = ("demo", "2wiki_s", "musique")  # where the shared reader's answers are recorded
# robust / hybrid (ours, issue 38) and the paper's residual_only / repeat_question controls make
# exactly full's LLM calls (the latter two only read the answers differently), so full's answers
# replay them
EVIREFORM_VARIANTS = ("base", "full", "residual_only", "repeat_question", "robust", "hybrid")
# the shared reader on the benchmark samples (issue 40), replayed from reproduce/qa-llm-cache.sqlite
QA_READERS = ("direct", "evireform-full", "evireform-robust", "proprag", "evireform-fused")
PROPRAG_DATASETS = ("2wiki_s", "musique", "hotpotqa_s")
# LLM baselines (issue 40): run name (runs/<run>.parquet) -> --method of stages.retrieve_method
BASELINE_METHODS: dict[str, str] = {
    "ircot": "ircot", "self_ask": "self_ask", "s2g_rag": "s2g_rag", "gear": "gear",
    "hipporag2": "hipporag2", "catrag": "catrag", "rerank-listwise": "listwise",
    "query2doc": "query2doc", "hyde": "hyde", "lamer": "lamer",
}
# the runs replayed per dataset
BASELINE_RUNS: dict[str, tuple[str, ...]] = {
    ds: ("ircot", "self_ask", "s2g_rag", "gear", "hipporag2", "catrag", "rerank-listwise",
         "query2doc", "hyde", "lamer")
    for ds in ("2wiki_s", "musique")
}
# runs whose answers another run's recording holds: HippoRAG 2's filter prompts are CatRAG's
BASELINE_CACHE_OF: dict[tuple[str, str], str] = {("musique", "hipporag2"): "catrag"}
# CEE (issue 40): the variants replayed per dataset from reproduce/<dataset>-cee-llm-cache.sqlite
CEE_RUNS: dict[str, tuple[str, ...]] = {
    **{ds: ("cee-full", "cee-no_coverage", "cee-no_contrastive", "cee-no_sequential", "cee-robust")
       for ds in ("musique", "2wiki_s")},
    "hotpotqa_s": ("cee-robust",),  # robust only: no LLM facet index there (retrieve_cee_robust)
}
# the datasets where the reader over CEE's top 5 is recorded (qa-<run>, group cee), and the runs
CEE_READ = ("musique", "2wiki_s")
CEE_READERS = ("cee-full", "cee-robust")
# Groups replayed on the reported samples whole, not their first SAMPLE_QUESTIONS questions: CEE's
# restricted facet index covers the passages that *any* question's dense top 3 reaches, so a cut
# sample would index fewer passages, rank differently and ask for probes never recorded.
WHOLE_SAMPLE_GROUPS = ("cee",)
GROUPS = ("deterministic", "evireform", "proprag", "qa", "baselines", "cee")


@dataclass(frozen=True)
class Entry:
    """One expected score."""

    dataset: str
    method: str
    metric: str
    value: float
    tolerance: float
    replay: bool


@contextlib.contextmanager
def _scratch(cut: bool = True) -> Iterator[Path]:
    """A scratch working directory with the params of the expected-scores samples
    (``cut=False``: the reported samples whole, see :data:`WHOLE_SAMPLE_GROUPS`)."""
    old = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="evichain-2cr-") as tmp:
        work = Path(tmp)
        (work / "data").symlink_to(ROOT / "data")
        params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
        for name in ("2wiki_s", "hotpotqa_s") if cut else ():
            params["data"]["samples"][name]["n_questions"] = SAMPLE_QUESTIONS
        (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
        os.chdir(work)
        try:
            yield work
        finally:
            os.chdir(old)


@dataclass
class _Stages:
    """Runs stage entry points in the scratch directory, each (entry point, arguments) once,
    so a run that several groups need (an index, a run another one fuses) is made once."""

    done: set[tuple[object, ...]] = field(default_factory=set)

    def __call__(self, main: Callable[..., None], **kwargs: object) -> bool:
        """Run ``main(**kwargs)`` unless it already ran; True when it ran now."""
        key = (main, *sorted(kwargs.items()))
        if key in self.done:
            return False
        self.done.add(key)
        _forget_clients()
        main(**_with_option_defaults(main, {"params_file": Path("params.yaml"), **kwargs}))
        return True


def _with_option_defaults(main: Callable[..., None], kwargs: dict[str, object]) -> dict[str, object]:
    """``kwargs`` plus the default of every Typer option of ``main`` they leave out: a stage
    entry point called as a plain function would otherwise see the ``typer.Option`` object
    itself as the value (e.g. ``stages.fuse``'s ``record``, where None means ``fuse``). A
    required option left out is a TypeError naming it."""
    from typer.models import OptionInfo

    out = dict(kwargs)
    for name, param in inspect.signature(main).parameters.items():
        if name in out or not isinstance(param.default, OptionInfo):
            continue
        if param.default.default is ...:
            raise TypeError(f"{main.__module__}.{main.__name__}: required option {name!r} not given")
        out[name] = param.default.default
    return out


def _forget_clients() -> None:
    """Start a stage with fresh LLM clients, as its own process under DVC would: the read flow
    keeps one client per (params, stage label) per process, and a label such as
    ``retrieve-catrag`` names no dataset, so its usage counters (the usage file, the failure
    rate check) would otherwise sum over the datasets run before (as ``scripts/drills`` does)."""
    mod = sys.modules.get("flows.read")
    if mod is not None:
        mod._CLIENTS.clear()


def _index(run: _Stages, ds: str) -> None:
    """The proposition index of ``ds`` (LLM extraction on the demo, replayed; the sentence
    extractor elsewhere) that EviReform, PropRAG, GeAR and the OpenIE triples read."""
    from stages import canonicalize_entities, extract_propositions, prepare

    run(prepare.main, dataset=ds)
    run(extract_propositions.main, dataset=ds)
    run(canonicalize_entities.main, dataset=ds)


def _ranking(run: _Stages, ds: str, name: str) -> None:
    """Make ``runs/<name>.parquet`` of ``ds`` (and what it reads) with its stage entry point;
    ``direct`` (the reader without passages) needs the questions only."""
    from stages import fuse, generate_facets, prepare, retrieve, retrieve_method

    run(prepare.main, dataset=ds)
    if name in ("bm25", "dense"):
        run(retrieve.main, dataset=ds, method=name)
    elif name == "proprag":
        _index(run, ds)
        run(retrieve_method.main, dataset=ds, method="proprag", variant=None)
    elif name == "evireform-fused":  # ours: robust ⊕ PropRAG
        _ranking(run, ds, "evireform-robust")
        _ranking(run, ds, "proprag")
        run(fuse.main, dataset=ds)
    elif name.startswith("evireform-"):
        _index(run, ds)
        run(retrieve_method.main, dataset=ds, method="evireform",
            variant=name.removeprefix("evireform-"))
    elif name in BASELINE_METHODS:
        _baseline(run, ds, name)
    elif name.startswith("cee-"):
        variant = name.removeprefix("cee-")
        if _cee_reads_facet_index(variant):  # `sentences` facets are built inside retrieval
            run(generate_facets.main, dataset=ds)
        if run(retrieve_method.main, dataset=ds, method="cee", variant=variant):
            _print_replay(ds, name, usage_name=f"retrieve_cee-{variant}")
    elif name != "direct":
        raise ValueError(f"no stage makes runs/{name}.parquet here")


def _cee_reads_facet_index(variant: str) -> bool:
    """Whether CEE ``variant`` (under the scratch ``params.yaml``) reads ``facets.parquet``:
    ``cee.facets.source: llm``, as in :mod:`flows.cee`."""
    from evichain.config import load_params
    from evichain.methods.cee.params import variant_params

    return variant_params(load_params(Path("params.yaml")).cee, variant).facets.source == "llm"


def _baseline(run: _Stages, ds: str, name: str) -> None:
    """An LLM baseline's run through ``stages.retrieve_method`` (dvc.yaml: retrieve_iterative,
    retrieve_iterative_graph, retrieve_graph, retrieve_rerank), after its inputs: the dense run
    (the reranked pool), the proposition index (GeAR) and its OpenIE triples (HippoRAG 2,
    CatRAG; ``graph.openie_by_dataset``: propositions, LLM-free, on the benchmarks)."""
    from stages import extract_triples, retrieve_method

    if name == "rerank-listwise":
        _ranking(run, ds, "dense")
    if name in ("gear", "hipporag2", "catrag"):
        _index(run, ds)
    if name in ("hipporag2", "catrag"):
        run(extract_triples.main, dataset=ds)
    run(retrieve_method.main, dataset=ds, method=BASELINE_METHODS[name], variant=None)
    _print_replay(ds, name)


def _print_replay(ds: str, name: str, usage_name: str | None = None) -> None:
    """One line of a baseline's (or CEE's) replay counts from its usage summary: requests, cache
    hits and failed requests (replay misses: 0, except one per split CatRAG batch and per call
    that failed in the recorded run too; CEE's stop reasons name the summary that failed)."""
    from evichain.paths import DatasetPaths

    usage_name = usage_name or f"retrieve-{name}"
    summary = json.loads(DatasetPaths(ds).usage(usage_name).read_text(encoding="utf-8"))
    usage = summary.get("llm_usage") or {}
    detail = (f"stop reasons: {summary['stop_reasons']}" if "stop_reasons" in summary  # CEE
              else f"split batches: {summary.get('split_batches', 0)}, "
                   f"failure kinds: {summary.get('failure_kinds', {})}")
    print(f"[reproduce] {ds} {name}: {usage.get('requests', 0)} requests, "
          f"{usage.get('cache_hits', 0)} cache hits, {usage.get('calls', 0)} model calls, "
          f"{usage.get('failures', 0)} failed ({detail})")


def _retrieval(run: _Stages, ds: str, name: str) -> None:
    """Make ``name``'s run on ``ds`` and evaluate it (reports/metrics/<ds>/<name>.json)."""
    from stages import evaluate

    _ranking(run, ds, name)
    run(evaluate.main, dataset=ds, method=name, kind="retrieval")


def _reader(run: _Stages, ds: str, name: str) -> None:
    """The shared reader over ``name``'s top passages (or ``direct``) on ``ds``, evaluated."""
    from stages import evaluate, read

    _ranking(run, ds, name)
    run(read.main, dataset=ds, method=name, evidence=False)
    run(evaluate.main, dataset=ds, method=name, kind="qa")


def _merge_caches(target: Path, extra: tuple[Path, ...]) -> None:
    """Copy the rows of ``extra`` recorded caches into ``target`` (first writer of a key wins)."""
    from evichain.llm.cache import LLMCache

    store = LLMCache(target)
    try:
        for path in extra:
            store.merge(path)
    finally:
        store.close()


def cee_cache(ds: str) -> Path:
    """The recorded cache that answers CEE's facets and exploration on ``ds``."""
    return ROOT / "reproduce" / f"{ds}-cee-llm-cache.sqlite"


def baseline_cache(ds: str, name: str) -> Path:
    """The recorded cache that answers baseline run ``name`` on ``ds``."""
    return ROOT / "reproduce" / f"{ds}-{BASELINE_CACHE_OF.get((ds, name), name)}-llm-cache.sqlite"


@contextlib.contextmanager
def _replay(cache: Path) -> Iterator[None]:
    """Answers only from ``cache`` (``EVICHAIN_LLM_REPLAY=1``), checkpoints beside it."""
    keys = ("EVICHAIN_LLM_CACHE", "EVICHAIN_LLM_REPLAY", "EVICHAIN_CHECKPOINT_DIR")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update({"EVICHAIN_LLM_CACHE": str(cache), "EVICHAIN_LLM_REPLAY": "1",
                       "EVICHAIN_CHECKPOINT_DIR": str(cache.parent / "checkpoints")})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _metrics(dataset: str, name: str) -> dict[str, float]:
    return json.loads((Path("reports/metrics") / dataset / f"{name}.json").read_text())


def group_of(entry: Entry) -> str:
    """The group (:data:`GROUPS`) an expected score belongs to."""
    method = entry.method
    if method.startswith(("cee-", "qa-cee-")):
        return "cee"
    if method.startswith("qa-"):
        return "qa"
    if method in ("bm25", "dense"):
        return "deterministic"
    if method in ("proprag", "evireform-fused"):
        return "proprag"
    if method.startswith("evireform-"):
        return "evireform"
    if method in BASELINE_METHODS:
        return "baselines"
    raise ValueError(f"{entry.dataset} {method}: no group")


def _list_option(argv: list[str], flag: str, metavar: str) -> list[str] | None:
    """The comma-separated values of ``flag VALUE`` / ``flag=VALUE`` (every occurrence,
    stripped, empty items dropped); None when ``flag`` is absent. A ValueError when ``flag``
    is last or followed by another option."""
    values = [a.split("=", 1)[1] for a in argv if a.startswith(f"{flag}=")]
    for i, arg in enumerate(argv):
        if arg == flag:
            if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                raise ValueError(f"{flag} needs {metavar}")
            values.append(argv[i + 1])
    if not values:
        return None
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


def parse_groups(argv: list[str]) -> tuple[str, ...]:
    """The groups of ``--only GROUP[,GROUP]`` (or ``--only=...``) in :data:`GROUPS` order;
    every group without it. A ValueError names an unknown group or a missing value."""
    names = _list_option(argv, "--only", "GROUP[,GROUP]")
    if names is None:
        return GROUPS
    unknown = sorted(set(names) - set(GROUPS))
    if unknown or not names:
        raise ValueError(f"unknown group(s) {unknown}; known: {', '.join(GROUPS)}")
    return tuple(g for g in GROUPS if g in names)


def _narrowing_option(argv: list[str], flag: str, metavar: str) -> tuple[str, ...] | None:
    """The distinct values of a narrowing option (``--runs``, ``--datasets``) in order; None
    without it. A ValueError names a missing value or a use with ``--write``."""
    names = _list_option(argv, flag, metavar)
    if names is None:
        return None
    if "--write" in argv:
        raise ValueError(f"{flag} cannot be combined with --write (it rewrites whole groups)")
    if not names:
        raise ValueError(f"{flag} needs {metavar}")
    return tuple(dict.fromkeys(names))


def parse_runs(argv: list[str]) -> tuple[str, ...] | None:
    """The run names of ``--runs NAME[,NAME]`` (or ``--runs=...``); None (every run) without
    it. A ValueError names a missing value or a use with ``--write``."""
    return _narrowing_option(argv, "--runs", "NAME[,NAME]")


def parse_datasets(argv: list[str]) -> tuple[str, ...] | None:
    """The datasets of ``--datasets DS[,DS]`` (or ``--datasets=...``); None (every dataset of
    the chosen groups) without it. A ValueError names an unknown dataset, a missing value or
    a use with ``--write``."""
    names = _narrowing_option(argv, "--datasets", "DS[,DS]")
    known = {ds for g in GROUPS for ds in _group_datasets(g, True)}
    unknown = sorted(set(names or ()) - known)
    if unknown:
        raise ValueError(f"--datasets: unknown dataset(s) {unknown}; known: {', '.join(sorted(known))}")
    return names


def known_runs() -> set[str]:
    """Every run name some group measures (``--runs`` accepts only these)."""
    return {"bm25", "dense", "direct", "proprag", "evireform-fused", *QA_READERS,
            *(f"evireform-{v}" for v in EVIREFORM_VARIANTS), *CEE_READERS,
            *(n for names in BASELINE_RUNS.values() for n in names),
            *(n for names in CEE_RUNS.values() for n in names)}


def check_runs(runs: tuple[str, ...] | None) -> None:
    """A ValueError naming every run of ``runs`` that no group measures (e.g. a typo)."""
    known = known_runs()
    unknown = sorted(set(runs or ()) - known)
    if unknown:
        raise ValueError(f"--runs: unknown run(s) {unknown}; known: {', '.join(sorted(known))}")


def wanted(name: str, runs: tuple[str, ...] | None) -> bool:
    """Whether run (or reader entry ``qa-<run>``) ``name`` is among ``runs`` (None: all)."""
    return runs is None or name in runs or name.removeprefix("qa-") in runs


def select(entries: list[Entry], groups: tuple[str, ...],
           runs: tuple[str, ...] | None = None,
           datasets: tuple[str, ...] | None = None) -> list[Entry]:
    """The entries of ``groups`` (and of ``runs`` and ``datasets``, when given)."""
    return [e for e in entries if group_of(e) in groups and wanted(e.method, runs)
            and (datasets is None or e.dataset in datasets)]


def is_large(entry: Entry) -> bool:
    """Entries whose runs encode a whole benchmark corpus (minutes on 2 cores): EviReform and
    the reader over its runs on 2wiki_s / MuSiQue, PropRAG, and the LLM baselines and CEE there.
    ``measure(large=False)`` (the test suite) leaves them out."""
    return entry.method in ("proprag", "evireform-fused") or (entry.dataset != "demo"
                                                              and entry.method != "bm25")


def _group_datasets(group: str, large: bool) -> tuple[str, ...]:
    """The datasets ``group`` is measured on (``large=False``: the demo's only)."""
    datasets = {"deterministic": BM25_DATASETS, "evireform": EVIREFORM_DATASETS,
                "proprag": PROPRAG_DATASETS, "qa": QA_DATASETS,
                "baselines": tuple(BASELINE_RUNS), "cee": tuple(CEE_RUNS)}[group]
    return datasets if large or group == "deterministic" else tuple(d for d in datasets if d == "demo")


def _scores(ds: str, name: str, metrics: tuple[str, ...], tolerance: float,
            replay: bool) -> list[Entry]:
    """``metrics`` of ``name`` on ``ds`` as evaluated in the scratch directory."""
    values = _metrics(ds, name)
    return [Entry(ds, name, m, values[m], tolerance, replay) for m in metrics]


def _measure_group(run: _Stages, group: str, datasets: tuple[str, ...],
                   runs: tuple[str, ...] | None = None) -> list[Entry]:
    """Run the stages of ``group`` on ``datasets`` (only those of ``runs``, when given) and
    return its measured entries."""
    entries: list[Entry] = []
    if group == "deterministic":
        for ds, name in [(d, n) for d, n in [*((d, "bm25") for d in datasets), ("demo", "dense")]
                         if wanted(n, runs)]:
            _retrieval(run, ds, name)
            entries += _scores(ds, name, METRICS, 1e-6, False)
    elif group == "evireform":
        for ds in datasets:
            for name in (f"evireform-{v}" for v in EVIREFORM_VARIANTS if wanted(f"evireform-{v}", runs)):
                _retrieval(run, ds, name)
                entries += _scores(ds, name, METRICS, LLM_BAND, True)
    elif group == "proprag":
        for ds in datasets:
            for name in (n for n in ("proprag", "evireform-fused") if wanted(n, runs)):
                _retrieval(run, ds, name)
                entries += _scores(ds, name, METRICS, PROPRAG_BAND, False)
    elif group == "qa":
        for ds in datasets:
            for name in (n for n in (("direct", "bm25", "dense") if ds == "demo" else QA_READERS)
                         if wanted(n, runs)):
                _reader(run, ds, name)
                entries += _scores(ds, f"qa-{name}", QA_METRICS, LLM_BAND, True)
    else:
        named = BASELINE_RUNS if group == "baselines" else CEE_RUNS
        for ds in datasets:
            for name in (n for n in named[ds] if wanted(n, runs)):
                _retrieval(run, ds, name)
                entries += _scores(ds, name, METRICS, LLM_BAND, True)
            for name in (n for n in (CEE_READERS if group == "cee" and ds in CEE_READ else ())
                         if wanted(n, runs)):
                _reader(run, ds, name)
                entries += _scores(ds, f"qa-{name}", QA_METRICS, LLM_BAND, True)
    return entries


def measure(cache: Path = RECORDED_CACHE, *, large: bool = True,
            groups: tuple[str, ...] = GROUPS, runs: tuple[str, ...] | None = None,
            datasets: tuple[str, ...] | None = None) -> list[Entry]:
    """Run the samples of ``groups`` (on ``datasets``, when given) and return the scores
    measured now (tolerances as recorded); ``large=False``: without the :func:`is_large`
    entries."""
    if not cache.exists():
        raise FileNotFoundError(f"{cache}: no recorded LLM cache (copy the cache of `make demo`)")
    plan = [(g, tuple(d for d in _group_datasets(g, large) if datasets is None or d in datasets))
            for g in GROUPS if g in groups]
    entries: list[Entry] = []
    for cut in (True, False):
        part = [(g, ds) for g, ds in plan if ds and (g in WHOLE_SAMPLE_GROUPS) != cut]
        if part:
            entries += _measure_in_scratch(cache, _recordings(part, runs), part, cut, runs)
    order = {g: i for i, g in enumerate(GROUPS)}
    return sorted(entries, key=lambda e: order[group_of(e)])


def _recordings(plan: list[tuple[str, tuple[str, ...]]],
                runs: tuple[str, ...] | None = None) -> tuple[Path, ...]:
    """The recorded caches ``plan``'s groups replay from (merged into its scratch cache): the
    shared :data:`EXTRA_CACHES`, each baseline run's and each CEE dataset's own file."""
    extra = [p for p in EXTRA_CACHES if p.exists()]
    extra += [baseline_cache(ds, name) for g, datasets in plan if g == "baselines"
              for ds in datasets for name in BASELINE_RUNS[ds] if wanted(name, runs)]
    extra += [cee_cache(ds) for g, datasets in plan if g == "cee" for ds in datasets]
    return tuple(dict.fromkeys(extra))


def _measure_in_scratch(cache: Path, extra: tuple[Path, ...],
                        plan: list[tuple[str, tuple[str, ...]]], cut: bool,
                        runs: tuple[str, ...] | None = None) -> list[Entry]:
    """Measure ``plan`` in one scratch directory (:func:`_scratch`), replaying ``cache`` merged
    with ``extra``."""
    with _scratch(cut) as work:
        scratch_cache = work / "llm-cache.sqlite"
        shutil.copy2(cache, scratch_cache)
        _merge_caches(scratch_cache, extra)
        run = _Stages()
        with _replay(scratch_cache):
            return [e for g, datasets in plan for e in _measure_group(run, g, datasets, runs)]


def load_expected(path: Path = EXPECTED) -> list[Entry]:
    rows = yaml.safe_load(path.read_text(encoding="utf-8"))["scores"]
    return [Entry(**row) for row in rows]


def write_expected(entries: list[Entry], path: Path = EXPECTED) -> None:
    header = {"questions_per_sample": SAMPLE_QUESTIONS,
              "whole_sample_groups": list(WHOLE_SAMPLE_GROUPS), "llm_cache": RECORDED_CACHE.name,
              "scores": [{**e.__dict__, "value": round(e.value, 6)} for e in entries]}
    path.write_text(yaml.safe_dump(header, sort_keys=False), encoding="utf-8")


def compare(expected: list[Entry], measured: list[Entry],
            groups: tuple[str, ...] = GROUPS, runs: tuple[str, ...] | None = None,
            datasets: tuple[str, ...] | None = None) -> list[str]:
    """Lines describing every expected score of ``groups`` (``runs``, ``datasets``) the
    measured run misses (empty = reproduced); the other expected scores are not checked.

    A replayed LLM score must match exactly (the cache makes it deterministic); its band
    applies to live re-runs only.
    """
    got = {(e.dataset, e.method, e.metric): e.value for e in measured}
    problems = []
    for e in select(expected, groups, runs, datasets):
        value = got.get((e.dataset, e.method, e.metric))
        tol = 1e-6 if e.replay else e.tolerance
        if value is None:
            problems.append(f"{e.dataset} {e.method} {e.metric}: not measured")
        elif abs(value - e.value) > tol:
            problems.append(f"{e.dataset} {e.method} {e.metric}: expected {e.value:.6f} ± {tol:g}, "
                            f"got {value:.6f}")
    return problems


def _key(entry: Entry) -> tuple[str, str, str]:
    return entry.dataset, entry.method, entry.metric


def rewritten(recorded: list[Entry], measured: list[Entry], groups: tuple[str, ...]) -> list[Entry]:
    """``--write``: the recorded entries of the other groups kept, those of ``groups`` replaced by
    ``measured`` (in place where the key was recorded, new keys appended)."""
    fresh = {_key(e): e for e in measured}
    out = [fresh.pop(_key(e), e) if group_of(e) in groups else e for e in recorded
           if group_of(e) not in groups or _key(e) in fresh]
    return out + list(fresh.values())


def added(recorded: list[Entry], measured: list[Entry]) -> list[Entry]:
    """``--add``: the measured entries whose key is not recorded yet."""
    known = {_key(e) for e in recorded}
    return [e for e in measured if _key(e) not in known]


def main(argv: list[str]) -> int:
    if "--help" in argv or "-h" in argv:
        print(__doc__)
        return 0
    try:
        groups, runs, datasets = parse_groups(argv), parse_runs(argv), parse_datasets(argv)
        check_runs(runs)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    measured = measure(groups=groups, runs=runs, datasets=datasets)
    if "--write" in argv:
        entries = rewritten(load_expected(), measured, groups)
        write_expected(entries)
        print(f"wrote {len(entries)} expected scores ({len(measured)} measured now: "
              f"{', '.join(groups)}) to {EXPECTED}")
        return 0
    problems = compare(load_expected(), measured, groups, runs, datasets)
    for line in problems:
        print(line)
    if "--add" in argv and not problems:
        new = added(load_expected(), measured)
        write_expected(load_expected() + new)
        for e in new:
            print(f"added {e.dataset} {e.method} {e.metric} = {e.value:.6f}")
        print(f"added {len(new)} expected scores to {EXPECTED}")
    checked = len(select(load_expected(), groups, runs, datasets))
    scope = ", ".join(groups) + (f" (runs {', '.join(runs)})" if runs else "") + (
        f" (datasets {', '.join(datasets)})" if datasets else "")
    print(f"{checked - len(problems)}/{checked} expected scores of {scope} reproduced "
          f"({len(measured)} measured)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
