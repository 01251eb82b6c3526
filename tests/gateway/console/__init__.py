"""Tests of gateway.console."""
