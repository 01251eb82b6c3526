"""Gateway API keys and virtual keys: hashing and the headers that carry them (`auth`), records,
stores (config and Redis), the admin API, the `gateway keys` commands, and every credential the
gateway knows (`known_secrets`, for the scrubber).

May import `gateway.api`, `gateway.config`, `policies` and `providers`. This package imports
nothing itself: import its modules."""
