"""Retrieval methods built on the shared index, LLM and embedding services (one package each).

The contract every method follows (:class:`~evichain.methods.base.Method`, one
``retrieve(question_id, question) -> QuestionResult``) and the registry (``register``,
``get_method``, ``methods``) are in :mod:`evichain.methods.base`.
"""
