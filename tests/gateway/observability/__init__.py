"""Tests of gateway.observability."""
