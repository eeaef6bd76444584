"""The one method contract (issue 39): no import cycle in the library, baselines independent of
EviReform's package, every registered method builds on a small corpus and answers with a
:class:`~evichain.methods.base.QuestionResult`, and a new method is one package plus one params
block (registered, its block accepted by ``load_params``, built and run)."""

from __future__ import annotations

import ast
import json
import sys
import textwrap
from functools import lru_cache
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from evichain.config import ParamsError, load_params, parse_params
from evichain.llm.scripted import set_responder
from evichain.methods.base import (
    BuildContext,
    Method,
    QuestionResult,
    Retriever,
    UnknownMethodError,
    get_method,
    methods,
    unregister,
)
from evichain.metrics.frames import as_polars
from tests.fixtures.lothair import QUESTION, SEVEN_PASSAGES, sentence_index
from tests.fixtures.scripted_llm import respond as fixture_respond
from tests.methods.rerank.test_rerank_cross_encoder import tiny_model_dir  # noqa: F401  (pytest fixture)

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "evichain"


# --------------------------------------------------------------------------- import graph
def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level(tree: ast.Module) -> list[ast.stmt]:
    """Statements run when the module is imported: the body and the bodies of module-level
    if / try / with / class blocks; function bodies and ``if TYPE_CHECKING:`` are not."""
    out: list[ast.stmt] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If):
            todo.extend(node.orelse if _is_type_checking(node.test) else [*node.body, *node.orelse])
        elif isinstance(node, ast.Try):
            todo.extend([*node.body, *node.orelse, *node.finalbody,
                         *(s for h in node.handlers for s in h.body)])
        elif isinstance(node, (ast.With, ast.ClassDef)):
            todo.extend(node.body)
    return out


def _imports(path: Path, modules: set[str], lazy: bool) -> set[str]:
    """evichain modules that ``path`` imports (module level only unless ``lazy``)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = list(ast.walk(tree)) if lazy else _module_level(tree)
    found: set[str] = set()
    for node in nodes:
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            subs = [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in modules]
            targets = subs if len(subs) == len(node.names) else [module, *subs]
        found.update(t for t in targets if t in modules and t != name)
    return found


@lru_cache(maxsize=2)
def import_graph(lazy: bool = False) -> dict[str, set[str]]:
    files = sorted(LIBRARY.rglob("*.py"))
    modules = {module_name(p) for p in files}
    return {module_name(p): _imports(p, modules, lazy) for p in files}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_cycle_among_library_modules() -> None:
    graph = import_graph()
    assert "evichain.config" in graph and graph["evichain.config"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_cycle_finder_names_the_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_cycle_suppressions_left() -> None:
    for rel in ("evichain/config.py", "evichain/llm/client.py"):
        assert "noqa: E402" not in (ROOT / rel).read_text(encoding="utf-8"), rel


# Modules that may import EviReform's package: the method itself, the hybrid built on it,
# config (composes every method's params block) and the report (tables of the method under
# study, generated from its traces).
MAY_IMPORT_EVIREFORM = ("evichain.methods.evireform", "evichain.methods.hybrid", "evichain.config",
                        "evichain.report",
                        # evichain run's call estimate reads every family's params and prompts,
                        # as the report does; no stage imports it
                        "evichain.methods.estimate")


def test_only_evireform_and_hybrid_import_evireform() -> None:
    offenders = {
        mod: sorted(t for t in targets if t.startswith("evichain.methods.evireform"))
        for mod, targets in import_graph(lazy=True).items()
        if not any(mod == a or mod.startswith(a + ".") for a in MAY_IMPORT_EVIREFORM)
    }
    offenders = {m: t for m, t in offenders.items() if t}
    assert not offenders, f"modules importing evichain.methods.evireform: {offenders}"


# --------------------------------------------------------------------------- registry
def test_registry_lists_every_method_family() -> None:
    expected = {"bm25", "dense", "listwise", "cross_encoder", "hyde", "query2doc", "lamer", "ircot",
                "self_ask", "s2g_rag", "gear", "hipporag2", "catrag", "proprag", "evireform", "cee",
                "hybrid"}
    assert expected <= set(methods())
    for name, method in methods().items():
        assert isinstance(method, Method) and method.name == name and method.variants
    with pytest.raises(UnknownMethodError, match=r"unknown method 'nope'; known: \[.*'bm25'"):
        get_method("nope")


def test_index_sources_and_query_llm_come_from_each_method() -> None:
    """``Method.sources`` resolves every table a variant reads to the stage that writes it (a
    method that declares ``index_sources`` reads only what it declares), and ``calls_llm``
    refines ``uses_llm`` per variant and params (what `evichain methods` prints)."""
    from evichain.methods.base import DENSE_RUN_INDEX, FACET_INDEX, PROPOSITION_INDEX, TRIPLE_INDEX

    llm_free = parse_params({"graph": {"openie": "propositions", "hipporag2": {"recognition_memory": False}},
                             "cee": {"facets": {"source": "sentences"}}})
    for params in (parse_params({}), llm_free):
        for name, method in methods().items():
            declared = {t for s in method.index_sources for t in s.tables}
            for variant in method.variants if method.index_sources else (None,):
                read = set(method.tables(params, variant))
                assert {t for s in method.sources(params, variant) for t in s.tables} == read, name
                assert not method.index_sources or read <= declared, (name, variant)
                assert method.uses_llm or not method.calls_llm(params, variant), (name, variant)
    defaults = parse_params({})
    assert get_method("evireform").sources(defaults) == (PROPOSITION_INDEX,)
    assert get_method("hipporag2").sources(defaults) == (TRIPLE_INDEX,)
    assert get_method("hipporag2").sources(llm_free) == (PROPOSITION_INDEX,)
    assert get_method("cee").sources(defaults) == (FACET_INDEX,)
    assert get_method("cee").sources(defaults, "robust") == ()
    assert get_method("listwise").sources(defaults) == (DENSE_RUN_INDEX,)
    assert get_method("bm25").sources(defaults) == () and get_method("ircot").sources(defaults) == ()
    assert not get_method("evireform").calls_llm(defaults, "base_top")
    assert get_method("evireform").calls_llm(defaults, "full")
    assert not get_method("proprag").calls_llm(defaults)
    assert get_method("hipporag2").calls_llm(defaults) and not get_method("hipporag2").calls_llm(llm_free)
    assert PROPOSITION_INDEX.built_by_llm(defaults) and not FACET_INDEX.built_by_llm(llm_free)
    assert not DENSE_RUN_INDEX.built_by_llm(defaults) and DENSE_RUN_INDEX.llm_note(defaults) == "no LLM"


def test_catalogue_lists_exactly_what_each_module_registers() -> None:
    """evichain/methods/catalogue.py is the one list of built-in names: each module registers
    the methods it is listed for, and every built-in method is listed."""
    from evichain.methods.catalogue import METHOD_MODULES

    registered = {name: type(m).__module__ for name, m in methods().items()}
    assert {n: m for n, m in registered.items() if m.startswith("evichain.")} == METHOD_MODULES


def test_catalogue_is_a_literal_importing_nothing() -> None:
    tree = ast.parse((LIBRARY / "methods" / "catalogue.py").read_text(encoding="utf-8"))
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    for node in tree.body[1:]:
        assert isinstance(node, ast.AnnAssign) and node.value is not None
        ast.literal_eval(node.value)


def test_get_method_imports_only_that_methods_module() -> None:
    """A stage running one method loads that method's code, no other's."""
    import subprocess

    code = ("import sys; from evichain.methods.base import get_method; get_method('listwise'); "
            "print(sorted(m for m in sys.modules if m.startswith('evichain.methods.') "
            "and m.endswith('.method')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "['evichain.methods.rerank.method']"


# --------------------------------------------------------------------------- every method builds
CORPUS = pl.DataFrame(SEVEN_PASSAGES, schema=["passage_id", "title", "text"], orient="row")
GOLD = {"q1": ["d0", "d1"]}


@lru_cache(maxsize=1)
def index_tables() -> dict[str, pl.DataFrame]:
    """The sentence proposition index of the corpus (as the index stages write it) and a facet
    table (as generate_facets writes it), polars as the methods' context holds them."""

    props, entities, incidence = (as_polars(t) for t in sentence_index(CORPUS.to_pandas()))
    facets = pl.DataFrame({"passage_id": ["d1", "d0"],
                           "facet_query": ["When did Ermengarde of Tours die?",
                                           "Who was the mother of Lothair II?"]})
    dense = pl.DataFrame({"question_id": ["q1"] * 3, "rank": [1, 2, 3],
                          "passage_id": ["d0", "d1", "d2"], "score": [0.9, 0.8, 0.7]})
    return {"propositions": props, "entities": entities, "incidence": incidence, "facets": facets,
            "runs/dense": dense}


def contract_respond(messages: list[dict[str, Any]], model: str) -> str:
    """The shared scripted model (EviReform, CEE, reader); '{}' for other prompts, which the
    methods must survive (repair, then their documented fallback)."""
    try:
        return fixture_respond(messages, model)
    except (ValueError, KeyError, TypeError, json.JSONDecodeError):
        return "{}"


def check_result(result: QuestionResult, n_passages: int) -> None:
    assert isinstance(result, QuestionResult)
    ranks = [r[1] for r in result.rows]
    assert ranks == list(range(1, len(ranks) + 1))
    assert all(r[0] == "q1" for r in result.rows)
    assert len(set(result.passage_ids)) == len(result.rows) <= n_passages
    assert set(result.passage_ids) <= set(CORPUS["passage_id"])
    assert isinstance(result.trace, dict) and isinstance(result.seconds, dict)
    assert set(result.usage) == {"prompt_tokens", "completion_tokens"}


@pytest.mark.parametrize("name", sorted(methods()))
def test_every_registered_method_builds_and_retrieves(name: str, tiny_model_dir: Path) -> None:  # noqa: F811
    set_responder(contract_respond)
    params = parse_params({
        "llm": {"model": "scripted/contract", "max_retries": 0, "backoff_base_s": 0.0},
        "rerank": {"pool_size": 4, "cross_encoder": {"model": str(tiny_model_dir), "max_length": 64}},
        "evireform": {"top_k": 7},
        "cee": {"k_cand": 2, "k_final": 3, "top_k": 5, "rounds": 2},
    })
    method = get_method(name)
    questions = pl.DataFrame({"question_id": ["q1"], "question": [QUESTION]})
    ctx = BuildContext(CORPUS, params, tables=index_tables(), gold=GOLD, questions=questions)
    retriever = method.build(ctx)
    assert isinstance(retriever, Retriever)
    check_result(retriever.retrieve("q1", QUESTION), len(CORPUS))


def test_evireform_variants_share_one_index() -> None:
    set_responder(contract_respond)
    params = parse_params({"llm": {"model": "scripted/contract", "max_retries": 0,
                                   "backoff_base_s": 0.0}})
    method = get_method("evireform")
    ctx = BuildContext(CORPUS, params, tables=index_tables(), gold=GOLD)
    index = method.index(ctx)
    for variant in ("base", "base_top", "robust", "hybrid"):
        check_result(method.build(ctx, variant, index).retrieve("q1", QUESTION), len(CORPUS))
    with pytest.raises(ValueError, match="no variant 'fused'.*known"):
        method.build(ctx, "fused", index)


# --------------------------------------------------------------------------- a new method
TOY_PACKAGE = '''
"""A toy method: passages ranked by words shared with the question (one package)."""

from evichain.methods.base import FunctionRetriever, Method, QuestionResult, register
from evichain.params_base import Section


class ToyParams(Section):
    top_k: int = 3
    lowercase: bool = True


@register
class Toy(Method):
    name = "toy_overlap"
    Params = ToyParams
    params_key = "toy_overlap"
    variants = ("default", "no_titles")

    def build(self, ctx, variant=None, index=None):
        variant = self.check_variant(variant)
        p = self.params_of(ctx.params)
        norm = (lambda s: s.lower()) if p.lowercase else (lambda s: s)
        docs = [(pid, set(norm((t + " " if variant == "default" else "") + x).split()))
                for pid, t, x in zip(ctx.corpus["passage_id"], ctx.corpus["title"], ctx.corpus["text"])]

        def retrieve(question_id, question):
            q = set(norm(question).split())
            scored = sorted(((len(q & words), -i, pid) for i, (pid, words) in enumerate(docs)),
                            reverse=True)[: p.top_k]
            rows = [(question_id, r, pid, float(s)) for r, (s, _, pid) in enumerate(scored, 1)]
            return QuestionResult(rows, {"question_id": question_id, "n_words": len(q)})

        return FunctionRetriever(retrieve)
'''


@pytest.fixture()
def toy_package(tmp_path: Path) -> Any:
    pkg = tmp_path / "pkgs" / "toy_overlap_method"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(TOY_PACKAGE), encoding="utf-8")
    sys.path.insert(0, str(pkg.parent))
    try:
        yield pkg
    finally:
        sys.path.remove(str(pkg.parent))
        sys.modules.pop("toy_overlap_method", None)
        unregister("toy_overlap")


def test_a_new_method_is_one_package_and_one_params_block(toy_package: Path, tmp_path: Path) -> None:
    with pytest.raises(ParamsError, match="unknown key 'toy_overlap'"):
        parse_params({"toy_overlap": {"top_k": 2}})          # not registered yet
    import toy_overlap_method  # noqa: F401  (registers the method and its params block)

    path = tmp_path / "params.yaml"
    path.write_text("toy_overlap:\n  top_k: 2\n  lowercase: true\nbaseline_datasets: [demo]\n",
                    encoding="utf-8")
    params = load_params(path)
    assert params.block("toy_overlap").top_k == 2
    assert parse_params({}).block("toy_overlap").top_k == 3   # defaults without a block
    path.write_text("toy_overlap:\n  top_k: 0x\n  bogus: 1\n", encoding="utf-8")
    with pytest.raises(ParamsError) as err:
        load_params(path)
    assert "toy_overlap.top_k" in str(err.value) and "unknown key 'toy_overlap.bogus'" in str(err.value)

    method = get_method("toy_overlap")
    assert "toy_overlap" in methods()
    retriever = method.build(BuildContext(CORPUS, params))
    result = retriever.retrieve("q1", QUESTION)
    check_result(result, 2)
    assert len(result.rows) == 2 and result.rows[0][2] == "d0"   # "Lothair II" shares most words
    assert method.build(BuildContext(CORPUS, params), "no_titles").retrieve("q1", QUESTION).rows


def test_a_plugin_method_runs_on_users_data(toy_package: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``$EVICHAIN_METHODS`` names a package outside the repository; ``evichain run`` finds it,
    validates its params block and scores it on the user's files."""
    import json

    from evichain.io import read_json
    from evichain.methods import base
    from flows.cli import run

    monkeypatch.setenv("EVICHAIN_METHODS", "toy_overlap_method")
    monkeypatch.setattr(base, "_BUILTINS_LOADED", False)
    rows = [{"id": "a", "title": "Erstein", "text": "Ermengarde died in the abbey of Erstein."},
            {"id": "b", "title": "Alps", "text": "Lake Geneva lies north of the Alps."}]
    corpus, questions = tmp_path / "c.jsonl", tmp_path / "q.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    questions.write_text(json.dumps({"id": "q", "question": "where did ermengarde die",
                                     "gold": ["a"]}) + "\n", encoding="utf-8")
    (tmp_path / "params.yaml").write_text("toy_overlap:\n  top_k: 1\n", encoding="utf-8")
    run(method="toy_overlap", corpus=corpus, questions=questions, gold=None, variant=None,
        out=tmp_path / "out", params_file=tmp_path / "params.yaml")
    assert read_json(tmp_path / "out" / "toy_overlap-metrics.json")["Recall@1"] == 1.0


def test_a_registered_method_runs_as_a_dvc_stage(toy_package: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m stages.retrieve_method --method <registered>`` needs no family flow: the
    generic registry flow builds it over the dataset's tables and writes the usual outputs."""
    from evichain.data.schema import corpus_table, questions_table
    from evichain.io import read_json, read_parquet, write_parquet
    from evichain.methods import base
    from evichain.paths import DatasetPaths
    from stages.retrieve_method import main

    monkeypatch.setenv("EVICHAIN_METHODS", "toy_overlap_method")
    monkeypatch.setattr(base, "_BUILTINS_LOADED", False)
    monkeypatch.chdir(tmp_path)
    corpus = corpus_table([("Erstein", "Ermengarde died in the abbey of Erstein."),
                           ("Alps", "Lake Geneva lies north of the Alps.")])
    questions = questions_table([{"question_id": "q", "question": "where did ermengarde die",
                                  "answers": ["Erstein"], "type": "", "n_hops": 1,
                                  "gold_passage_ids": [corpus["passage_id"][0]]}])
    paths = DatasetPaths("fx")
    write_parquet(corpus, paths.corpus)
    write_parquet(questions, paths.questions)
    (tmp_path / "params.yaml").write_text("toy_overlap:\n  top_k: 2\n", encoding="utf-8")
    main(dataset="fx", method="toy_overlap", variant="no_titles", params_file=Path("params.yaml"))
    run = read_parquet(paths.run("toy_overlap-no_titles"))
    assert list(run["passage_id"]) == list(corpus["passage_id"]) and len(run) == 2
    assert len(read_parquet(paths.trace("toy_overlap-no_titles"))) == 1
    usage = read_json(paths.usage("retrieve-toy_overlap-no_titles"))
    assert usage["questions"] == 1 and usage["variant"] == "no_titles"
