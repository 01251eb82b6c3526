"""Tests of providers.local."""
