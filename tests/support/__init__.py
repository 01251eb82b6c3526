"""Shared helpers and fakes of the tests: fake upstreams, Redis and browser helpers, tiny models."""
