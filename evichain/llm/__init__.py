"""The project's one LLM client (litellm underneath) and its value types.

The names below load on first use (PEP 562), so importing a light submodule such as
:mod:`evichain.llm.params` (which :mod:`evichain.config` composes) does not import litellm.
litellm reads its bundled cost map instead of fetching one: the default is set here, before
any submodule imports litellm.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

if TYPE_CHECKING:
    from evichain.llm.cache import LLMCache, default_cache_path
    from evichain.llm.client import LLMClient, parse_json_object, resolve_endpoint
    from evichain.llm.types import LLMFailure, LLMResult, LLMSuccess, Prompt, Usage

__all__ = [
    "LLMCache", "LLMClient", "LLMFailure", "LLMResult", "LLMSuccess", "Prompt", "Usage",
    "default_cache_path", "parse_json_object", "resolve_endpoint",
]


def __getattr__(name: str) -> Any:
    if name in ("LLMClient", "parse_json_object", "resolve_endpoint"):
        from evichain.llm import client as module
    elif name in ("LLMCache", "default_cache_path"):
        from evichain.llm import cache as module
    elif name in ("LLMFailure", "LLMResult", "LLMSuccess", "Prompt", "Usage"):
        from evichain.llm import types as module
    else:
        raise AttributeError(f"module 'evichain.llm' has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value
