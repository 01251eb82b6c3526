"""Tests of policies.redis."""
