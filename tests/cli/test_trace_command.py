"""`evichain trace RUN QUESTION_ID`: the command over the tiny tables of tests/report/test_trace.py;
an unknown run or question is one error line with the valid choices and exit code 2."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from evichain.cli import app
from tests.report.test_trace import root  # noqa: F401  (pytest fixture)

runner = CliRunner()


def test_trace_prints_the_steps_and_the_top_k(root: Path) -> None:  # noqa: F811
    result = runner.invoke(app, ["trace", "evireform-full", "q1", "--dataset", "toy", "--root", str(root),
                                 "--k", "2"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("evireform-full · question q1 (trace: evireform)\n")
    assert "  round 2: When did Ermengarde die?" in result.output
    assert "Top 2:" in result.output
    assert result.output.rstrip().endswith("Recall@2: 0.50 (1/2 gold in the top 2)")


def test_unknown_run_or_question_is_one_line_naming_the_choices(root: Path) -> None:  # noqa: F811
    run = runner.invoke(app, ["trace", "cee", "q1", "-d", "toy", "--root", str(root)])
    assert run.exit_code == 2
    assert run.output.strip().splitlines() == [
        f"error: no run 'cee' of toy in {root / 'toy' / 'runs'} (known: bm25, cee-full, "
        "evireform-full, self_ask)"]
    question = runner.invoke(app, ["trace", "cee-full", "nope", "-d", "toy", "--root", str(root)])
    assert question.exit_code == 2
    assert len(question.output.strip().splitlines()) == 1
    assert "no question 'nope'" in question.output and "(known: q1, q2)" in question.output
    zero = runner.invoke(app, ["trace", "cee-full", "q1", "-d", "toy", "--root", str(root), "--k", "0"])
    assert zero.exit_code == 2
