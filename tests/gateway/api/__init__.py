"""Tests of gateway.api."""
