"""Tests of providers.upstream."""
