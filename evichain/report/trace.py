"""One question's path through a method (``evichain trace RUN QUESTION_ID``).

A run is found by :func:`locate_run`: a run name of a dataset (``artifacts/<dataset>/runs/<run>
.parquet`` with ``traces/<run>.parquet``) or an ``evichain run`` output folder (``<out>/<label>
.parquet``, ``<label>-trace.parquet`` and the tables under ``<out>/artifacts/<name>/``; its run
is in the user's passage ids, mapped back through ``id_map.parquet``).

:func:`question_trace` reads the question, its gold passages, the method's trace row and the
top k of the run; :func:`format_trace` prints it. What the trace row shows depends on the
columns the method's trace-writing code stores (the first of :data:`TRACE_KINDS` whose columns
the table has):

* ``evireform`` (EviReform and the hybrid): the selected propositions with their candidate
  ranks, the observed passages, the residual queries per round and the retained residual
  propositions (texts from ``index/propositions.parquet``).
* ``cee``: per exploration round its probes, evidence summary and pool size; bridge additions.
* ``iterative`` (IRCoT, Self-Ask, S2G-RAG, GeAR): per step its query and retrieved passages,
  then the method's own record (reasoning sentences, follow-ups with intermediate answers, gap
  items per judged turn, GeAR's memory and expanded passages), the evidence and the answer.
* ``graph``: HippoRAG 2 / CatRAG's kept facts, seed and anchor entities; PropRAG's seed
  entities and proposition paths.
* ``expansion``: the generated texts, the expanded query, LameR's candidates.
* ``rerank``: the first-stage pool the reranker reordered.
* ``first_stage``: a trace of question ids only — the method records no intermediate steps.

Every other column is listed too (scalars as ``name=value``, lists by length), so nothing the
trace holds is hidden; a trace no kind matches is printed column by column.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from evichain.io import read_table
from evichain.paths import DatasetPaths

TEXT_CHARS = 180
"""Longest text (proposition, probe, generated passage) printed on one line."""
FIELD_LINE = 100
"""Width the remaining scalar fields are wrapped at."""


class TraceError(LookupError):
    """An unknown dataset, run or question, with the valid choices in the message."""


def choices(name: str, known: Sequence[str], what: str, limit: int = 8) -> str:
    """``known: a, b`` when at most ``limit`` choices, else the ``limit`` closest to ``name``
    (rapidfuzz WRatio) and the total: ``closest: a, b (of 100 question ids)``."""
    if not known:
        return f"no {what} there"
    if len(known) <= limit:
        return "known: " + ", ".join(known)
    from rapidfuzz import process

    close = [c for c, _, _ in process.extract(name, list(known), limit=limit)]
    return f"closest: {', '.join(close)} (of {len(known)} {what})"


# --------------------------------------------------------------------------- locating a run
@dataclass(frozen=True)
class RunFiles:
    """Where one run's tables are: the run and trace tables, the dataset's tables (corpus,
    questions with gold, index) and, for an ``evichain run`` folder, the id map
    (``passage_id, user_id``) the run's passage ids are written in."""

    label: str
    run: Path
    trace: Path
    paths: DatasetPaths
    id_map: Path | None = None


def locate_run(run: str, dataset: str = "demo", root: Path = Path("artifacts")) -> RunFiles:
    """The files of ``run``: an ``evichain run`` output folder (``<out>`` holding one run, or
    ``<out>/<label>``: a path of two parts or more), else the run ``run`` of ``dataset`` under
    ``root``. A TraceError names
    the valid choices."""
    given = Path(run)
    if given.is_dir():
        labels = user_labels(given)
        if len(labels) != 1:
            raise TraceError(f"{given} holds {len(labels)} runs of evichain run; name one as "
                             f"{given}/<label> ({choices(run, labels, 'runs')})")
        return user_run(given, labels[0])
    if len(given.parts) > 1 and (given.parent / "artifacts").is_dir():
        labels = user_labels(given.parent)
        if given.name not in labels:
            raise TraceError(f"no run {given.name!r} in {given.parent} "
                             f"({choices(given.name, labels, 'runs')})")
        return user_run(given.parent, given.name)
    return dataset_run(run, dataset, root)


def dataset_run(run: str, dataset: str, root: Path) -> RunFiles:
    """Run ``run`` of ``root/dataset``; a TraceError names the datasets or runs there."""
    paths = DatasetPaths(dataset, root)
    if not paths.questions.is_file():
        known = sorted(p.parent.name for p in root.glob("*/questions.parquet"))
        raise TraceError(f"no dataset {dataset!r} under {root} ({choices(dataset, known, 'datasets')})")
    if not paths.run(run).is_file():
        known = sorted(p.stem for p in (paths.dir / "runs").glob("*.parquet"))
        raise TraceError(f"no run {run!r} of {dataset} in {paths.dir / 'runs'} "
                         f"({choices(run, known, 'runs')})")
    return RunFiles(run, paths.run(run), paths.trace(run), paths)


def user_labels(out: Path) -> list[str]:
    """The run labels of an ``evichain run`` output folder (those with a ``-trace`` table)."""
    return sorted(p.name.removesuffix("-trace.parquet") for p in out.glob("*-trace.parquet")
                  if (out / f"{p.name.removesuffix('-trace.parquet')}.parquet").is_file())


def user_run(out: Path, label: str) -> RunFiles:
    """Run ``label`` of the ``evichain run`` folder ``out`` (its one dataset under
    ``out/artifacts``)."""
    names = sorted(p.parent.name for p in (out / "artifacts").glob("*/questions.parquet"))
    if len(names) != 1:
        raise TraceError(f"{out / 'artifacts'} should hold the one dataset evichain run wrote; "
                         f"found {names or 'none'}")
    paths = DatasetPaths(names[0], out / "artifacts")
    id_map = paths.dir / "id_map.parquet"
    return RunFiles(label, out / f"{label}.parquet", out / f"{label}-trace.parquet", paths,
                    id_map if id_map.is_file() else None)


# --------------------------------------------------------------------------- passages
@dataclass
class Passages:
    """Names of passages and propositions for printing: title, the id the user knows (the
    user's id in an ``evichain run`` folder) and a ✓ for gold; proposition texts by id."""

    titles: dict[str, str]
    shown: dict[str, str]
    gold: set[str]
    propositions: dict[str, str] | None = None

    def name(self, passage_id: str) -> str:
        """``Title [id] ✓`` (✓ for a gold passage)."""
        pid = str(passage_id)
        title = self.titles.get(pid, "(not in the corpus)")
        return f"{title} [{self.shown.get(pid, pid)}]{' ✓' if pid in self.gold else ''}"

    def names(self, passage_ids: Iterable[Any]) -> str:
        """Names of ``passage_ids`` separated by ``; `` (``-`` for none)."""
        return "; ".join(self.name(p) for p in passage_ids) or "-"

    def proposition(self, prop_id: str) -> str:
        """``text — passage name`` of proposition ``passage_id#k`` (the id alone when the index
        table is absent)."""
        passage = self.name(str(prop_id).rsplit("#", 1)[0])
        if self.propositions is None or prop_id not in self.propositions:
            return f"{prop_id} — {passage}"
        return f"{short(self.propositions[prop_id])} — {passage}"


def short(text: Any, limit: int = TEXT_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters with ``…``."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def items(value: Any) -> list[Any]:
    """A list column's value as a list (polars gives lists, pandas numpy arrays; None → [])."""
    if value is None:
        return []
    if isinstance(value, np.ndarray):
        return [items(v) if isinstance(v, np.ndarray) else v for v in value.tolist()]
    return list(value)


# --------------------------------------------------------------------------- trace kinds
@dataclass(frozen=True)
class Section:
    """A titled block of lines of the printed trace."""

    heading: str
    lines: tuple[str, ...] = ()


Formatter = Callable[[dict[str, Any], Passages], list[Section]]


def numbered(values: Iterable[Any], start: int = 1) -> list[str]:
    """``  1. value`` lines."""
    return [f"  {n}. {short(v)}" for n, v in enumerate(values, start)]


def evireform_sections(row: dict[str, Any], p: Passages) -> list[Section]:
    """Selection (propositions with their candidate ranks), observed passages, residual queries
    per round and the retained residual propositions; the judge when it ran."""
    ranks = items(row.get("selected_ranks"))
    selected = [f"  #{r} {p.proposition(i)}" for i, r in zip(items(row["selected_ids"]), ranks, strict=False)]
    fallback = ", fallback" if row.get("selection_fallback") else ""
    out = [Section(f"Selected propositions (selection {row.get('selection_status', '?')}{fallback}; "
                   f"#: rank among {len(items(row.get('candidate_ids')))} candidates)",
                   tuple(selected) or ("  none",)),
           Section("Observed passages", (f"  {p.names(items(row.get('observed_passage_ids')))}",))]
    queries, rounds = items(row["residual_queries"]), items(row.get("residual_rounds"))
    lines = [f"  round {r}: {short(q)}" for q, r in zip(queries, rounds or [1] * len(queries), strict=False)]
    out.append(Section(f"Residual queries (reformulation {row.get('reformulation_status', '?')}, "
                       f"{row.get('rounds_used', 0)} round(s))", tuple(lines) or ("  none",)))
    retained = [f"  {p.proposition(i)}" for i in items(row.get("retained_residual_prop_ids"))]
    out.append(Section("Retained by the residual queries", tuple(retained) or ("  none",)))
    if row.get("judge_status", "off") != "off":
        out.append(Section(f"Judge: {row['judge_status']}"
                           f"{' (fallback)' if row.get('judge_fallback') else ''}"))
    return out


EVIREFORM_SHOWN = ("selected_ids", "selected_ranks", "selection_status", "selection_fallback",
                   "candidate_ids", "observed_passage_ids", "residual_queries", "residual_rounds",
                   "reformulation_status", "rounds_used", "retained_residual_prop_ids",
                   "judge_status", "judge_fallback")


def cee_sections(row: dict[str, Any], p: Passages) -> list[Section]:
    """Per exploration round: its probes, the evidence summary and the pool size; the stop
    reason; bridge additions and LLM failures where recorded."""
    probes, rounds = items(row["probes"]), items(row["probe_rounds"])
    summaries, sizes = items(row.get("summaries")), items(row.get("pool_sizes"))
    out = []
    for r in sorted(set(rounds)):
        size = f", pool {sizes[r - 1]} passages" if 0 < r <= len(sizes) else ""
        lines = [f"  probe: {short(q)}" for q, t in zip(probes, rounds, strict=False) if t == r]
        if 0 < r <= len(summaries):
            lines.append(f"  summary: {short(summaries[r - 1])}")
        out.append(Section(f"Round {r}{size}", tuple(lines)))
    out.append(Section(f"Stopped: {row.get('stop_reason', '?')} after {row.get('rounds_run', '?')} "
                       f"round(s); gold in pool {row.get('gold_in_pool', '?')}/{row.get('n_gold', '?')}"))
    bridges = items(row.get("bridge_ids"))
    if bridges:
        src, when = items(row.get("bridge_source_ids")), items(row.get("bridge_rounds"))
        lines = [f"  round {t}: {p.name(b)} (from {p.name(s)})"
                 for b, s, t in zip(bridges, src, when, strict=False)]
        out.append(Section("Bridge additions", tuple(lines)))
    failures = items(row.get("llm_failures"))
    if failures:
        out.append(Section("LLM failures", tuple(numbered(failures))))
    return out


CEE_SHOWN = ("probes", "probe_rounds", "summaries", "pool_sizes", "stop_reason", "rounds_run",
             "gold_in_pool", "n_gold", "bridge_ids", "bridge_source_ids", "bridge_rounds",
             "llm_failures")


def _gap_lines(judged: Sequence[str]) -> list[str]:
    """S2G-RAG's gap items per judged turn (JSON lists of ``category, target, slot,
    description``)."""
    lines = []
    for turn, text in enumerate(judged, 1):
        gaps = json.loads(text)
        described = [" ".join(str(g.get(k, "")) for k in ("target", "slot", "description") if g.get(k))
                     for g in gaps]
        lines.append(f"  after turn {turn}: {short(' | '.join(described) or 'no gap (sufficient)')}")
    return lines


def iterative_sections(row: dict[str, Any], p: Passages) -> list[Section]:
    """Per step its query and retrieved passages; the method's own record (IRCoT reasoning,
    Self-Ask follow-ups → intermediate answers, S2G-RAG gap items, GeAR memory and expanded
    passages); the evidence read and the answer."""
    queries, retrieved = items(row["queries"]), items(row["step_retrieved_ids"])
    steps: list[str] = []
    for n, query in enumerate(queries, 1):
        steps.append(f"  {n}. {short(query)}")
        if n <= len(retrieved):
            steps.append(f"     retrieved: {p.names(retrieved[n - 1])}")
    out = [Section(f"Steps ({row.get('n_steps', len(queries))}; stop: {row.get('stop_reason', '?')}, "
                   f"status {row.get('status', '?')})", tuple(steps) or ("  none",))]
    if row.get("error"):
        out.append(Section(f"Error: {short(row['error'])}"))
    if "reasoning" in row:
        out.append(Section("Reasoning (IRCoT)", tuple(numbered(items(row["reasoning"])))))
    if "follow_ups" in row:
        answers = items(row.get("intermediate_answers"))
        out.append(Section("Follow-ups → intermediate answers (Self-Ask)", tuple(
            f"  {n}. {short(f)} → {short(a)}" for n, (f, a) in enumerate(
                zip(items(row["follow_ups"]), answers, strict=False), 1))))
    if "gap_items" in row:
        out.append(Section(f"Gap items (S2G-RAG; {row.get('n_selected_sentences', '?')} sentences "
                           "selected)", tuple(_gap_lines(items(row["gap_items"]))) or ("  none",)))
    if "memory" in row:
        out.append(Section("Memory (GeAR)", tuple(numbered(items(row["memory"]))) or ("  none",)))
        out.append(Section("Expanded passages per step (GeAR)", tuple(
            f"  {n}. {p.names(ids)}" for n, ids in enumerate(items(row.get("expanded_ids")), 1))))
    out.append(Section("Evidence read", (f"  {p.names(items(row.get('evidence_ids')))}",)))
    out.append(Section(f"Answer: {short(row.get('method_answer', ''))}"))
    return out


ITERATIVE_SHOWN = ("queries", "step_retrieved_ids", "n_steps", "stop_reason", "status", "error",
                   "reasoning", "follow_ups", "intermediate_answers", "gap_items",
                   "n_selected_sentences", "memory", "expanded_ids", "evidence_ids", "method_answer")


def _triple(fact: Any) -> str:
    return "(" + ", ".join(str(x) for x in items(fact)) + ")"


def hippo_sections(row: dict[str, Any], p: Passages) -> list[Section]:
    """HippoRAG 2 / CatRAG: the facts kept by the recognition-memory filter, the seed entities
    of the PPR, CatRAG's anchors; the dense fallback when no fact was kept."""
    kept = items(row["kept_facts"])
    out = [Section(f"Kept facts ({len(kept)} of {len(items(row.get('candidate_facts')))} linked; "
                   f"filter {row.get('filter_status', '?')})", tuple(f"  {_triple(f)}" for f in kept)
                   or ("  none",)),
           Section("Seed entities", (f"  {short(', '.join(map(str, items(row['seed_entities']))) or '-')}",))]
    if row.get("anchor_status", "off") != "off":
        out.append(Section(f"Anchors (CatRAG; {row['anchor_status']})", (
            f"  mentions: {short(', '.join(map(str, items(row.get('anchor_mentions')))) or '-')}",
            f"  entities: {short(', '.join(map(str, items(row.get('anchor_entities')))) or '-')}")))
    if items(row.get("scored_seeds")):
        out.append(Section("Scored seeds (CatRAG)", tuple(numbered(items(row["scored_seeds"])))))
    if row.get("fallback"):
        out.append(Section(f"Fallback: {row['fallback']}"))
    return out


HIPPO_SHOWN = ("kept_facts", "candidate_facts", "filter_status", "seed_entities", "anchor_status",
               "anchor_mentions", "anchor_entities", "scored_seeds", "fallback")


def proprag_sections(row: dict[str, Any], p: Passages) -> list[Section]:
    """PropRAG: the seed entities and proposition paths (``prop > prop (score)``) of both
    stages."""
    out = []
    for stage in (1, 2):
        seeds = ", ".join(map(str, items(row.get(f"stage{stage}_seed_entities"))))
        out.append(Section(f"Stage {stage} seed entities", (f"  {short(seeds) or '-'}",)))
        out.append(Section(f"Stage {stage} paths", tuple(numbered(items(row.get(f"stage{stage}_paths"))))
                           or ("  none",)))
    if row.get("fallback"):
        out.append(Section(f"Fallback: {row['fallback']}"))
    return out


PROPRAG_SHOWN = ("stage1_seed_entities", "stage1_paths", "stage2_seed_entities", "stage2_paths",
                 "fallback")


def expansion_sections(row: dict[str, Any], p: Passages) -> list[Section]:
    """The texts the LLM generated, the expanded query (query2doc, LameR), LameR's candidate
    passages; failures."""
    out = [Section(f"Generated ({row.get('n_generated', '?')} of {row.get('n_requested', '?')}; "
                   f"status {row.get('status', '?')}{', fallback' if row.get('fallback') else ''})",
                   tuple(numbered(items(row["generated"]))) or ("  none",))]
    if row.get("expanded_query"):
        out.append(Section("Expanded query", (f"  {short(row['expanded_query'], 2 * TEXT_CHARS)}",)))
    if "candidate_ids" in row:
        out.append(Section("Candidates shown to the LLM (LameR)",
                           (f"  {p.names(items(row['candidate_ids']))}",)))
    errors = items(row.get("errors"))
    if errors:
        out.append(Section("Errors", tuple(numbered(errors))))
    return out


EXPANSION_SHOWN = ("generated", "n_generated", "n_requested", "status", "fallback", "expanded_query",
                   "candidate_ids", "errors")


def rerank_sections(row: dict[str, Any], p: Passages) -> list[Section]:
    """The first-stage pool the reranker reordered (dense order) and the gold it held."""
    pool = items(row["pool_ids"])
    return [Section(f"First-stage pool ({len(pool)} passages, dense order; gold in pool "
                    f"{row.get('gold_in_pool', '?')}/{row.get('n_gold', '?')}; status "
                    f"{row.get('status', '?')}{', fallback' if row.get('fallback') else ''})",
                    tuple(numbered(p.name(i) for i in pool)))]


RERANK_SHOWN = ("pool_ids", "gold_in_pool", "n_gold", "status", "fallback")


@dataclass(frozen=True)
class TraceKind:
    """A family's trace: the columns that identify it, its formatter, the columns it shows."""

    name: str
    needs: frozenset[str]
    sections: Formatter
    shown: tuple[str, ...]


TRACE_KINDS: tuple[TraceKind, ...] = (
    TraceKind("evireform", frozenset({"selected_ids", "residual_queries"}), evireform_sections,
              EVIREFORM_SHOWN),
    TraceKind("cee", frozenset({"probes", "probe_rounds"}), cee_sections, CEE_SHOWN),
    TraceKind("iterative", frozenset({"queries", "step_retrieved_ids"}), iterative_sections,
              ITERATIVE_SHOWN),
    TraceKind("graph", frozenset({"kept_facts", "seed_entities"}), hippo_sections, HIPPO_SHOWN),
    TraceKind("graph", frozenset({"stage1_paths", "stage2_paths"}), proprag_sections, PROPRAG_SHOWN),
    TraceKind("expansion", frozenset({"generated"}), expansion_sections, EXPANSION_SHOWN),
    TraceKind("rerank", frozenset({"pool_ids", "reranked_ids"}), rerank_sections, RERANK_SHOWN),
)
"""The trace kinds, tried in order (EviReform's columns before the others')."""


def kind_of(columns: Iterable[str]) -> TraceKind | None:
    """The first kind whose identifying columns the trace has, else None."""
    have = set(columns)
    return next((k for k in TRACE_KINDS if k.needs <= have), None)


def other_fields(row: dict[str, Any], shown: Iterable[str]) -> list[Section]:
    """The columns a kind does not show: scalars as ``name=value`` (wrapped), lists by length."""
    skip = {"question_id", *shown}
    scalars, lists = [], []
    for key, value in row.items():
        if key in skip:
            continue
        if isinstance(value, (list, tuple, np.ndarray)):
            lists.append(f"{key}: {len(items(value))} items")
        else:
            scalars.append(f"{key}={short(value, 60)}")
    lines: list[str] = []
    for part in scalars + lists:
        if lines and len(lines[-1]) + len(part) + 2 <= FIELD_LINE:
            lines[-1] += f", {part}"
        else:
            lines.append(f"  {part}")
    return [Section("Other trace fields", tuple(lines))] if lines else []


def generic_sections(row: dict[str, Any], p: Passages) -> list[Section]:
    """A trace of no known kind: every column, lists item by item."""
    lines = []
    for key, value in row.items():
        if key == "question_id":
            continue
        if isinstance(value, (list, tuple, np.ndarray)):
            lines.append(f"  {key}:")
            lines.extend(f"  {line}" for line in numbered(items(value)))
        else:
            lines.append(f"  {key}: {short(value)}")
    return [Section("Trace fields (no known kind: printed as stored)", tuple(lines))]


# --------------------------------------------------------------------------- one question
@dataclass(frozen=True)
class Ranked:
    """One row of the run's top k."""

    rank: int
    score: float
    passage_id: str
    gold: bool


@dataclass
class QuestionTrace:
    """What :func:`format_trace` prints for one question of one run."""

    label: str
    question_id: str
    question: str
    answers: list[str]
    gold: list[str]
    kind: str
    sections: list[Section]
    top: list[Ranked]
    k: int
    passages: Passages
    notes: list[str] = field(default_factory=list)

    @property
    def recall(self) -> float | None:
        """|gold ∩ top k| / |gold|; None without gold passages."""
        if not self.gold:
            return None
        return len({r.passage_id for r in self.top} & set(self.gold)) / len(self.gold)


def _question(files: RunFiles, question_id: str) -> dict[str, Any]:
    """The row of ``question_id`` in the dataset's questions; a TraceError names the ids."""
    questions = read_table(files.paths.questions)
    ids = questions["question_id"].cast(pl.String)
    match = questions.filter(ids == question_id)
    if match.height == 0:
        raise TraceError(f"no question {question_id!r} in {files.paths.questions} "
                         f"({choices(question_id, ids.to_list(), 'question ids')})")
    return match.row(0, named=True)


def _text_map(path: Path, key: str, value: str) -> dict[str, str]:
    """``key`` → ``value`` (both as text) of the Parquet table at ``path``."""
    table = read_table(path, columns=[key, value])
    return dict(table.select(pl.col(key).cast(pl.String), pl.col(value).cast(pl.String)).iter_rows())


def _passages(files: RunFiles, gold: set[str]) -> tuple[Passages, dict[str, str]]:
    """The corpus names and the map from the run's passage ids to the corpus's."""
    titles = _text_map(files.paths.corpus, "passage_id", "title")
    shown = {p: p for p in titles}
    if files.id_map is not None:
        shown = _text_map(files.id_map, "passage_id", "user_id")
    props_file = files.paths.index_file("propositions.parquet")
    props = _text_map(props_file, "prop_id", "text") if props_file.is_file() else None
    to_corpus = {user: pid for pid, user in shown.items()}
    return Passages(titles, shown, gold, props), to_corpus


def question_trace(files: RunFiles, question_id: str, k: int = 10) -> QuestionTrace:
    """The question, its gold, the trace row's sections (by :func:`kind_of`) and the run's top
    ``k`` (passage ids in the corpus's ids) of ``question_id``; a TraceError names the question
    ids when it is unknown."""
    q = _question(files, question_id)
    gold = [str(g) for g in items(q.get("gold_passage_ids"))]
    passages, to_corpus = _passages(files, set(gold))
    run = read_table(files.run)
    rows = run.filter(pl.col("question_id").cast(pl.String) == question_id).sort("rank").head(k)
    ids = [to_corpus.get(str(pid), str(pid)) for pid in rows["passage_id"]]
    top = [Ranked(int(r), float(s), pid, pid in gold)
           for r, s, pid in zip(rows["rank"], rows["score"], ids, strict=True)]
    notes = [] if rows.height else [f"the run has no rows for {question_id}"]
    kind, sections = "none", []
    if not files.trace.is_file():
        notes.append(f"no trace table at {files.trace}: only the ranking is shown")
    else:
        trace = read_table(files.trace)
        hit = trace.filter(pl.col("question_id").cast(pl.String) == question_id)
        if hit.height == 0:
            notes.append(f"{files.trace} has no row for {question_id}")
        else:
            kind, sections = trace_sections(hit.row(0, named=True), passages, files.label)
    return QuestionTrace(files.label, question_id, str(q["question"]),
                         [str(a) for a in items(q.get("answers"))], gold, kind, sections, top, k,
                         passages, notes)


def trace_sections(row: dict[str, Any], passages: Passages, label: str) -> tuple[str, list[Section]]:
    """The kind name and sections of one trace row: the kind's own, then the other fields; a
    row of question id only says the method records no intermediate steps."""
    if set(row) == {"question_id"}:
        return "first_stage", [Section(f"{label} records no intermediate steps (its trace holds "
                                       "question ids only): the ranking below is all it produced")]
    kind = kind_of(row)
    if kind is None:
        return "unknown", generic_sections(row, passages)
    return kind.name, kind.sections(row, passages) + other_fields(row, kind.shown)


def format_trace(qt: QuestionTrace) -> str:
    """The printed trace: header (run, question, answers, gold), the trace sections, then the
    top k (rank, score, ✓ for gold, title and id) and the recall of gold in it."""
    p = qt.passages
    lines = [f"{qt.label} · question {qt.question_id} (trace: {qt.kind})",
             f"Q: {qt.question}"]
    if qt.answers:
        lines.append(f"answers: {'; '.join(qt.answers)}")
    lines.append("gold: " + ("; ".join(p.name(g).removesuffix(" ✓") for g in qt.gold) or
                             "none given"))
    lines.extend(f"note: {n}" for n in qt.notes)
    for section in qt.sections:
        lines.append("")
        lines.append(section.heading)
        lines.extend(section.lines)
    lines.append("")
    lines.append(f"Top {qt.k}:")
    for r in qt.top:
        name = p.name(r.passage_id).removesuffix(" ✓")
        lines.append(f"  {r.rank:>3}  {r.score:>9.4f}  {'✓' if r.gold else ' '}  {name}")
    recall = qt.recall
    found = len({r.passage_id for r in qt.top} & set(qt.gold))
    lines.append(f"Recall@{qt.k}: " + ("n/a (no gold passages)" if recall is None else
                                       f"{recall:.2f} ({found}/{len(qt.gold)} gold in the top {qt.k})"))
    return "\n".join(lines)
