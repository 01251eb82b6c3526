"""Tests of gateway.pipeline."""
