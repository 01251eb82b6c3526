"""`POST /v1/responses` on the chat pipeline: the stored responses (memory or Redis) and the edge
that renders a chat answer, plain, streamed or replayed from the cache, as a `response`."""
