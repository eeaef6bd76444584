"""Reliability drills (faults, crash_resume, concurrent_writers, bad_input): each a script that
prints its figures and writes a JSON; ``scripts/reliability_report.py`` runs them all at scale
and ``tests/test_reliability_*.py`` at CI scale."""
