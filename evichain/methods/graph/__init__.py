"""Graph retrievers (re-implementations): HippoRAG 2, CatRAG and PropRAG."""
