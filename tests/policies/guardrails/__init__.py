"""Tests of policies.guardrails."""
