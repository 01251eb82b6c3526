"""The Chat Completions side of the providers that translate (Anthropic, Gemini, the local engine):
the `chat.completion` shape built from neutral parts (`shape`), what a foreign API can honour of a
chat body (`params`), the message helpers every translation shares (`messages`), and each foreign
API's translation of messages and tools (`anthropic`, `gemini`)."""
