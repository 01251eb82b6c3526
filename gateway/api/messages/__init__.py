"""The Anthropic Messages API (`POST /v1/messages`) at the edge: its requests translated onto the
chat pipeline, its answers, streams and errors translated back. Leaves: no gateway layer below."""
