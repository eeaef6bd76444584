"""Benchmark data layer: source checks, per-dataset conversion and the table schema."""
