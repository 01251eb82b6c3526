"""The OpenAI Responses API (`POST /v1/responses`) at the edge: its body validated and bridged onto
a chat body, a chat answer (plain or streamed) rendered back as a `response` and its events."""
