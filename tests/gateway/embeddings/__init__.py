"""Tests of gateway.embeddings."""
