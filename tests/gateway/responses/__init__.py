"""Tests of gateway.responses."""
