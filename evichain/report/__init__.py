"""Markdown/CSV tables and PNG figures of the evaluation results."""
