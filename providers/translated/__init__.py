"""Providers whose upstream API is not the Completions API (Anthropic, Gemini, chat-only models):
the generic HTTP provider (`provider`, `stream`) and the small `adapter` interface that one
foreign API implements. What such an API can honour of a Completions body is
`providers.completion_params`."""
