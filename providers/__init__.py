"""Backends the gateway forwards completions to, behind one small `Provider` interface."""
