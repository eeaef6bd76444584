"""The one list of built-in method names and params blocks, each with the module that defines it.

Two literals and nothing else: this module imports nothing, so reading it costs nothing and
``scripts/dvc_deps.py`` reads it from the source (``ast.literal_eval``) without importing the
project.

* :data:`METHOD_MODULES`: method name (``--method``) → the module whose import registers it
  (:func:`evichain.methods.base.register`). :func:`evichain.methods.base.get_method` imports
  only the module of the name it is asked for; :func:`~evichain.methods.base.methods` imports
  them all.
* :data:`METHOD_FAMILIES`: method name → its family, whose conventions name the method's
  stage outputs and place it in the report (``iterative_graph``: an iterative baseline that
  also reads the proposition index; ``registered``: named as a plug-in, ``hybrid`` and ``fused``
  included). A method not listed here is ``registered``.
* :data:`BLOCK_MODULES`: top-level ``params.yaml`` block of a method → its params module, whose
  import registers the block (:func:`evichain.params_base.register_block`).
  :mod:`evichain.config` knows every valid block name from here and loads a block's module by
  name when the block is validated or read (``params.rerank``).

A new built-in method adds its lines here; a method kept outside the repository registers
itself through ``$EVICHAIN_METHODS`` instead (:func:`evichain.methods.base.plugin_modules`).
``tests/methods/test_method_contract.py`` checks that every module registers exactly what is listed.
"""

METHOD_MODULES: dict[str, str] = {
    "bm25": "evichain.methods.first_stage",
    "dense": "evichain.methods.first_stage",
    "listwise": "evichain.methods.rerank.method",
    "cross_encoder": "evichain.methods.rerank.method",
    "hyde": "evichain.methods.expansion.method",
    "query2doc": "evichain.methods.expansion.method",
    "lamer": "evichain.methods.expansion.method",
    "ircot": "evichain.methods.iterative.method",
    "self_ask": "evichain.methods.iterative.method",
    "s2g_rag": "evichain.methods.iterative.method",
    "gear": "evichain.methods.iterative.method",
    "hipporag2": "evichain.methods.graph.method",
    "catrag": "evichain.methods.graph.method",
    "proprag": "evichain.methods.graph.method",
    "evireform": "evichain.methods.evireform.method",
    "cee": "evichain.methods.cee.method",
    "hybrid": "evichain.methods.hybrid.method",
    "fused": "evichain.methods.fused.method",
}

METHOD_FAMILIES: dict[str, str] = {
    "bm25": "first_stage", "dense": "first_stage",
    "listwise": "rerank", "cross_encoder": "rerank",
    "hyde": "expansion", "query2doc": "expansion", "lamer": "expansion",
    "ircot": "iterative", "self_ask": "iterative", "s2g_rag": "iterative",
    "gear": "iterative_graph",
    "hipporag2": "graph", "catrag": "graph", "proprag": "graph",
    "evireform": "evireform", "cee": "cee", "hybrid": "registered",
    "fused": "registered",
}

BLOCK_MODULES: dict[str, str] = {
    "rerank": "evichain.methods.rerank.params",
    "expansion": "evichain.methods.expansion.params",
    "iterative": "evichain.methods.iterative.params",
    "graph": "evichain.methods.graph.params",
    "evireform": "evichain.methods.evireform.params",
    "cee": "evichain.methods.cee.params",
    "fused": "evichain.methods.fused.params",
}
