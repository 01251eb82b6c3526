"""Tests of the policies package: cache, guardrails, limits, Redis."""
