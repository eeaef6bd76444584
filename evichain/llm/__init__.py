"""The project's one LLM client (litellm underneath) and its value types."""

from evichain.llm.cache import LLMCache, default_cache_path
from evichain.llm.client import LLMClient, parse_json_object, resolve_endpoint
from evichain.llm.types import LLMFailure, LLMResult, LLMSuccess, Prompt, Usage

__all__ = [
    "LLMCache", "LLMClient", "LLMFailure", "LLMResult", "LLMSuccess", "Prompt", "Usage",
    "default_cache_path", "parse_json_object", "resolve_endpoint",
]
