"""Tests of policies.limits."""
