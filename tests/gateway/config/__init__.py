"""Tests of gateway.config."""
