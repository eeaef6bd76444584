"""The ``evichain`` command: cache import/export/stats (resuming a long LLM run on another
machine from a recorded cache) and the params check."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evichain.cli import app, parse_time
from evichain.config import load_params
from evichain.llm.cache import CachedResponse, LLMCache, read_summary

runner = CliRunner()


def _put(cache: LLMCache, key: str, prompt: str, content: str, tokens: int = 10) -> None:
    cache.put(key, model="m", prompt=prompt,
              response=CachedResponse(content=content, prompt_tokens=tokens, completion_tokens=1,
                                      cost_usd=0.0))


def _backdate(path: Path, key: str, created_at: float) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE responses SET created_at=? WHERE key=?", (created_at, key))


def _contents(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT key, content FROM responses").fetchall())


def test_import_adds_only_missing_keys_and_keeps_existing_answers(tmp_path: Path) -> None:
    recorded, local = tmp_path / "recorded.sqlite", tmp_path / "local.sqlite"
    rec = LLMCache(recorded)
    _put(rec, "k1", "iterative.s2g_judge@v1", "recorded-1")
    _put(rec, "k2", "iterative.s2g_judge@v1", "recorded-2")
    rec.close()
    loc = LLMCache(local)
    _put(loc, "k1", "iterative.s2g_judge@v1", "local-1")
    loc.close()

    result = runner.invoke(app, ["cache", "import", str(recorded), "--cache", str(local)])
    assert result.exit_code == 0, result.output
    assert "1 new responses" in result.output
    assert _contents(local) == {"k1": "local-1", "k2": "recorded-2"}
    again = runner.invoke(app, ["cache", "import", str(recorded), "--cache", str(local)])
    assert "0 new responses" in again.output


def test_import_of_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["cache", "import", str(tmp_path / "nope.sqlite"),
                                 "--cache", str(tmp_path / "c.sqlite")])
    assert result.exit_code != 0
    assert "no such LLM cache file" in result.output


def test_export_selects_one_run_by_time_and_prompt_name(tmp_path: Path) -> None:
    local = tmp_path / "local.sqlite"
    cache = LLMCache(local)
    _put(cache, "old", "iterative.self_ask@v1", "earlier run")
    _put(cache, "sa", "iterative.self_ask@v1", "this run")
    _put(cache, "rd", "qa-reader@listing4-v1", "this run's reader")
    _put(cache, "lookalike", "iterative.self_ask_x@v1", "another prompt with the same prefix")
    cache.close()
    _backdate(local, "old", 1_000.0)

    dest = tmp_path / "out" / "run.sqlite"
    result = runner.invoke(app, ["cache", "export", str(dest), "--since", "2000",
                                 "--prompt", "iterative.self_ask", "--prompt", "qa-reader",
                                 "--cache", str(local)])
    assert result.exit_code == 0, result.output
    assert _contents(dest) == {"sa": "this run", "rd": "this run's reader"}
    with sqlite3.connect(dest) as conn:  # a compact single file, ready to commit
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert not Path(f"{dest}-wal").exists()

    again = runner.invoke(app, ["cache", "export", str(dest), "--cache", str(local)])
    assert again.exit_code != 0
    assert "exists" in again.output


def test_export_then_import_round_trip_answers_every_call_from_the_cache(tmp_path: Path) -> None:
    first = LLMCache(tmp_path / "machine1.sqlite")
    for i in range(5):
        _put(first, f"k{i}", "iterative.s2g_select@v1", f"answer {i}")
    first.close()
    recorded = tmp_path / "reproduce" / "run.sqlite"
    LLMCache(tmp_path / "machine1.sqlite").export(recorded)
    fresh = LLMCache(tmp_path / "machine2.sqlite")
    assert fresh.merge(recorded) == 5
    got = fresh.get("k3")
    assert got is not None and got.content == "answer 3" and got.from_cache


def test_stats_counts_rows_and_tokens_per_prompt(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = LLMCache(path)
    _put(cache, "a", "p@v1", "x", tokens=7)
    _put(cache, "b", "p@v1", "y", tokens=5)
    _put(cache, "c", "q@v2", "z", tokens=1)
    cache.close()
    assert read_summary(path) == [("p@v1", 2, 12, 2), ("q@v2", 1, 1, 1)]
    result = runner.invoke(app, ["cache", "stats", "--cache", str(path)])
    assert result.exit_code == 0
    assert "3 responses" in result.output and "p@v1" in result.output


def test_stats_leaves_a_recorded_cache_file_untouched(tmp_path: Path) -> None:
    source = LLMCache(tmp_path / "machine.sqlite")
    _put(source, "a", "p@v1", "x", tokens=3)
    recorded = tmp_path / "recorded.sqlite"
    source.export(recorded)
    before = recorded.read_bytes()
    result = runner.invoke(app, ["cache", "stats", "--cache", str(recorded)])
    assert result.exit_code == 0 and "1 responses" in result.output
    assert recorded.read_bytes() == before                      # still DELETE journal, same bytes
    assert not any(p.name.startswith("recorded.sqlite-") for p in tmp_path.iterdir())  # no -wal
    missing = runner.invoke(app, ["cache", "stats", "--cache", str(tmp_path / "none.sqlite")])
    assert missing.exit_code == 2 and "no such LLM cache file" in missing.output
    assert not (tmp_path / "none.sqlite").exists()


def test_parse_time_accepts_unix_seconds_and_iso_and_names_bad_input() -> None:
    assert parse_time("1764583550") == 1764583550.0
    assert parse_time("2026-12-01T10:05:00+00:00") == 1796119500.0
    with pytest.raises(Exception, match="neither Unix seconds nor an ISO 8601"):
        parse_time("yesterday")


def test_params_check_names_the_bad_key(tmp_path: Path) -> None:
    bad = tmp_path / "params.yaml"
    bad.write_text("iterative:\n  s2g_rag:\n    max_turnz: 3\n", encoding="utf-8")
    result = runner.invoke(app, ["params", "check", str(bad)])
    assert result.exit_code == 1
    assert "iterative.s2g_rag.max_turnz" in result.output
    good = runner.invoke(app, ["params", "check", "params.yaml"])
    assert good.exit_code == 0, good.output


def _methods_table(output: str) -> dict[str, list[str]]:
    """Rows of `evichain methods` by method: family, query LLM, index read, index LLM, variants
    (columns split on 2+ spaces)."""
    import re

    lines = output.split("\nquery LLM: ")[0].splitlines()[1:]
    return {cells[0]: cells[1:] for cells in (re.split(r"\s{2,}", line) for line in lines)}


def test_methods_lists_llm_use_at_query_time_and_in_the_index_under_the_params(tmp_path: Path) -> None:
    from evichain.methods.base import methods

    params_file = Path(__file__).resolve().parents[2] / "params.yaml"
    shipped = runner.invoke(app, ["methods", "--params", str(params_file)])
    assert shipped.exit_code == 0, shipped.output
    rows = _methods_table(shipped.output)
    params = load_params(params_file)
    assert set(rows) == set(methods())
    for name, method in methods().items():   # every cell comes from the method itself
        sources = method.sources(params)
        assert rows[name][:3] == [method.family, "yes" if method.calls_llm(params) else "no",
                                  ", ".join(s.describe() for s in sources) or "passages only"]
    assert rows["bm25"][1:4] == ["no", "passages only", "no"]
    assert rows["ircot"][1:4] == ["yes", "passages only", "no"]
    assert rows["proprag"][1] == "no" and rows["hipporag2"][1] == "yes"
    assert rows["evireform"][2:4] == ["propositions (extract_propositions)", "per dataset"]
    assert rows["evireform"][4].split(", ")[2] == "full*"
    assert rows["gear"][2] == "propositions (extract_propositions)"
    assert rows["hipporag2"][2] == "triples (extract_triples)"
    assert rows["cee"][2:4] == ["CEE facets (generate_facets)", "yes"]
    assert rows["listwise"][1:4] == ["yes", "first-stage run (retrieve_dense)", "no"]
    assert rows["cross_encoder"][1:4] == ["no", "first-stage run (retrieve_dense)", "no"]
    assert ("propositions (extract_propositions): an LLM (evireform.index.extractor: llm; "
            "sentences on") in shipped.output
    assert "triples (extract_triples): an LLM (graph.openie: llm; propositions on" in shipped.output
    assert "CEE facets (generate_facets): an LLM (cee.facets.source: llm)" in shipped.output
    assert "first-stage run (retrieve_dense): no LLM" in shipped.output

    llm_free = tmp_path / "params.yaml"
    llm_free.write_text("evireform: {index: {extractor: sentences}, selection: top, reformulation: false}\n"
                        "graph: {openie: propositions, hipporag2: {recognition_memory: false}}\n"
                        "cee: {facets: {source: sentences}}\n", encoding="utf-8")
    result = runner.invoke(app, ["methods", "--params", str(llm_free)])
    assert result.exit_code == 0, result.output
    rows = _methods_table(result.output)
    assert rows["evireform"][1:4] == ["no", "propositions (extract_propositions)", "no"]
    assert rows["hipporag2"][1:4] == ["no", "propositions (extract_propositions)", "no"]
    assert rows["cee"][1:4] == ["yes", "passages only", "no"]
    assert "propositions (extract_propositions): no LLM (evireform.index.extractor: sentences)" \
        in result.output
    assert "facets" not in result.output.split("\nquery LLM: ")[1]
    assert all(line.split() for line in result.output.splitlines())  # no blank line


def test_methods_without_a_params_file_reads_the_defaults(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["methods"])
    assert result.exit_code == 0, result.output
    assert "under the default params (no params.yaml here)" in result.output
    assert _methods_table(result.output)["evireform"][2:4] == ["propositions (extract_propositions)", "yes"]
    missing = runner.invoke(app, ["methods", "--params", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2 and "nope.yaml" in missing.output


def test_help_lists_every_command_with_a_one_line_description() -> None:
    import flows.cli  # noqa: F401  (adds `run` to the app, as the console command does)

    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0, result.output
    for command in ("run", "methods", "cache", "params", "compare-methods", "qa-traces",
                    "trace", "sensitivity"):
        assert f"│ {command} " in result.output, command
