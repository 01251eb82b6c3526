"""Tests of policies.cache."""
