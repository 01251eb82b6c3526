"""Tests of the providers package: the provider types, the upstream client, the local engine."""
