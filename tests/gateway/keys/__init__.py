"""Tests of gateway.keys."""
