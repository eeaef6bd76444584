"""The reading path: README.md stays a short user guide whose commands are real, and every
relative link in the hand-written pages (README.md, docs/*.md, reports/notes.md and
reports/notes/*.md) points to a file, and a heading, that exists.

Offline and fast: it reads Markdown files, the Makefile and dvc.yaml, and introspects the
``evichain`` command's Typer app (no stage, model or server is started).
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_MAX_LINES = 300
NOTES_INDEX = ROOT / "reports" / "notes.md"
NOTES_DIR = ROOT / "reports" / "notes"
NOTES_INDEX_MAX_LINES = 60

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
REF_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(\S+)", re.M)
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
EXTERNAL = ("http://", "https://", "mailto:", "ftp://")


def _hand_written_pages() -> list[Path]:
    pages = [README, *sorted((ROOT / "docs").glob("*.md")), NOTES_INDEX]
    return pages + sorted(NOTES_DIR.glob("*.md")) if NOTES_DIR.is_dir() else pages


def _without_code(text: str) -> str:
    """The text with fenced code blocks and inline code spans blanked out (links inside code
    are examples, not links)."""
    text = FENCE.sub("", text)
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", text)


def links(path: Path) -> list[str]:
    text = _without_code(path.read_text(encoding="utf-8"))
    return INLINE_LINK.findall(text) + REF_LINK.findall(text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text lower-cased, punctuation and symbols
    dropped (letters, digits, marks, ``-`` and ``_`` kept), spaces turned into hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).lower()
    kept = (ch for ch in text
            if ch in "-_ " or unicodedata.category(ch)[0] in "LNM")
    return "".join(kept).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, title in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(title)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(page: Path) -> list[str]:
    bad = []
    for target in links(page):
        if target.startswith(EXTERNAL):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (page.parent / file_part).resolve() if file_part else page
        if not resolved.exists():
            bad.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            bad.append(f"{target}: no heading with anchor #{anchor} in {resolved.name}")
    return bad


def test_readme_is_short() -> None:
    n_lines = len(README.read_text(encoding="utf-8").splitlines())
    assert n_lines <= README_MAX_LINES, (
        f"README.md has {n_lines} lines (at most {README_MAX_LINES}): move reference detail to "
        "docs/ and run notes to reports/notes/, and link to them")


def test_readme_links_the_guide_essentials() -> None:
    text = README.read_text(encoding="utf-8")
    for needed in ("make all", "make test", "reports/README.md", "docs/reference.md",
                   "Use a hosted LLM", "api_key_env"):
        assert needed in text, f"README.md lost {needed!r}"


@pytest.mark.parametrize("page", _hand_written_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    assert page.exists(), f"{page.relative_to(ROOT)} is missing"
    assert not broken_links(page), f"{page.relative_to(ROOT)}: " + "; ".join(broken_links(page))


def test_link_checker_catches_bad_targets(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# Title (`x`) — a ⊕ b\n\n## Title (`x`) — a ⊕ b\n")
    page = tmp_path / "a.md"
    page.write_text("[ok](b.md#title-x--a--b) [dup](b.md#title-x--a--b-1) [web](https://x.org)\n"
                    "[gone](c.md) [no anchor](b.md#nope) `[code](c.md)`\n\n"
                    "```\n[block](c.md)\n```\n")
    assert broken_links(page) == ["c.md: no such file",
                                  "b.md#nope: no heading with anchor #nope in b.md"]


# --- the README's commands --------------------------------------------------------------------

def _readme_code() -> list[str]:
    """Every shell-like snippet of the README: the lines of its fenced blocks (comments cut)
    and its inline code spans."""
    text = README.read_text(encoding="utf-8")
    lines = []
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S):
        lines += [ln.split("  #")[0].strip() for ln in block.splitlines()]
    lines += re.findall(r"`([^`\n]+)`", FENCE.sub("", text))
    return [ln for ln in lines if ln]


def _makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return {t for t in re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", text, re.M)}


def test_readme_make_targets_exist() -> None:
    targets = _makefile_targets()
    used = {m for snippet in _readme_code() for m in re.findall(r"\bmake ([a-z][\w-]*)", snippet)}
    assert used, "no make command found in README.md"
    assert used <= targets, f"README.md names make targets the Makefile lacks: {used - targets}"


def test_readme_stage_names_exist() -> None:
    stages = set(yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"])
    text = README.read_text(encoding="utf-8")
    section = text.split("## What each stage does", 1)[1].split("\n## ", 1)[0]
    named = {n for n in re.findall(r"`([a-z][a-z_]*)`", section)}
    assert named, "the README's stage list is empty"
    assert named <= stages, f"README.md names stages dvc.yaml lacks: {named - stages}"
    modules = {m for s in _readme_code() for m in re.findall(r"python -m stages\.(\w+)", s)}
    assert all((ROOT / "stages" / f"{m}.py").exists() for m in modules), modules


def test_readme_paths_exist() -> None:
    """Repository files the README names in code (scripts, recorded caches, tests, modules)."""
    missing = []
    for snippet in _readme_code():
        for token in re.findall(r"(?:^|[\s(])((?:scripts|reproduce|tests|evichain|flows|stages|"
                                r"docs|reports)/[\w./-]+\.\w+)", snippet):
            if not (ROOT / token).exists():
                missing.append(token)
    assert not missing, f"README.md names files that do not exist: {missing}"


def _evichain_command():
    import typer

    from flows.cli import app
    return typer.main.get_command(app)


def _evichain_commands() -> list[list[str]]:
    """The README's ``evichain ...`` commands as argument lists; ``evichain cache stats | export
    | import`` lists alternatives for its last word and counts as three commands."""
    commands = []
    for snippet in _readme_code():
        if not snippet.startswith("evichain "):
            continue
        first, *alternatives = (part.strip() for part in snippet.split("|"))
        words = shlex.split(first)[1:]
        commands.append(words)
        commands += [words[:-1] + shlex.split(alt) for alt in alternatives]
    return commands


def test_readme_evichain_commands_exist() -> None:
    """Each ``evichain ...`` command of the README resolves to a subcommand of the installed
    command and passes only options that subcommand has (groups are found by their
    ``commands``: Typer ships its own copy of click)."""
    import typer

    from flows.cli import app

    root = typer.main.get_command(app)
    commands = _evichain_commands()
    assert len(commands) >= 3, "expected the README's `evichain run` / `methods` / `cache` commands"
    for words in commands:
        command, rest = root, list(words)
        while hasattr(command, "commands") and rest and not rest[0].startswith("-"):
            name = rest.pop(0)
            assert name in command.commands, f"README.md: `evichain {' '.join(words)}`: no {name!r}"
            command = command.commands[name]
        assert not hasattr(command, "commands"), f"`evichain {' '.join(words)}` is a group"
        options = {o for p in command.params for o in getattr(p, "opts", [])}
        unknown = [w for w in rest if w.startswith("--") and w.split("=")[0] not in options]
        assert not unknown, f"README.md: `evichain {' '.join(words)}`: unknown options {unknown}"


# --- the notes on the runs ----------------------------------------------------------------------

def test_notes_index_is_short_and_lists_every_topic() -> None:
    text = NOTES_INDEX.read_text(encoding="utf-8")
    n_lines = len(text.splitlines())
    assert n_lines <= NOTES_INDEX_MAX_LINES, (
        f"reports/notes.md has {n_lines} lines: it is the index, the notes go under reports/notes/")
    topics = sorted(NOTES_DIR.glob("*.md"))
    assert topics, "reports/notes/ holds no topic page"
    linked = {(NOTES_INDEX.parent / t.partition("#")[0]).resolve() for t in links(NOTES_INDEX)}
    unlisted = [t.name for t in topics if t.resolve() not in linked]
    assert not unlisted, f"reports/notes.md does not link {unlisted}"


@pytest.mark.parametrize("page", sorted(NOTES_DIR.glob("*.md")), ids=lambda p: p.name)
def test_notes_pages_have_headings_and_a_way_back(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# "), f"{page.name} starts without a title"
    assert re.search(r"^## ", text, re.M), f"{page.name} has no section heading"
    assert "../notes.md" in links(page), f"{page.name} does not link back to the index"


def test_generated_reports_reach_the_notes() -> None:
    """The report stage writes links to ``notes.md`` (reports/README.md) and ``../notes.md``
    (reports/datasets/*.md); the index must stay where they point."""
    pages = [ROOT / "reports" / "README.md", *sorted((ROOT / "reports" / "datasets").glob("*.md"))]
    targets = [(page, t) for page in pages if page.exists() for t in links(page)
               if t.partition("#")[0].endswith("notes.md")]
    assert targets, "no generated page links the notes"
    for page, target in targets:
        assert (page.parent / target.partition("#")[0]).resolve() == NOTES_INDEX.resolve(), (
            f"{page.relative_to(ROOT)} links {target}, not reports/notes.md")

