"""Tests of gateway.routing."""
