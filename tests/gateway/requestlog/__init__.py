"""Tests of gateway.requestlog."""
