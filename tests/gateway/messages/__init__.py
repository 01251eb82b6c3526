"""Tests of gateway.messages."""
