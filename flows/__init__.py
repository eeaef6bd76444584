"""Prefect flows: fan work out over tasks (per passage, question or shard) with retries,
concurrency and progress. They call the ``evichain`` library and know nothing about DVC."""
