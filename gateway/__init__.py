"""An LLM gateway: OpenAI Completions in front of many providers."""

__version__ = "0.1.0"
