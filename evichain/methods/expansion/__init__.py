"""Query expansion baselines: HyDE, query2doc and LameR."""
