"""Benchmarks of the library's hot paths, each with its recorded results beside it
(``benchmarks/<name>.results.md``). Run from the repository root as
``python -m benchmarks.<name>``; they are not part of the pipeline (``dvc.yaml``)."""
