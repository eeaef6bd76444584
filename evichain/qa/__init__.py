"""Question answering over a method's final context (the shared reader) and without context."""
