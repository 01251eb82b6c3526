"""An LLM gateway: the OpenAI Completions and Chat Completions APIs in front of many providers."""

__version__ = "0.1.0"
