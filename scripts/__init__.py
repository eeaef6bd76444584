"""Project scripts, run as modules from the repository root: ``python -m scripts.<name>``."""
