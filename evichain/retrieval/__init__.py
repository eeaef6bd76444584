"""First-stage retrievers (BM25, dense) and the run-table helpers every method uses."""
