"""The in-process inference engine (`type: local`). Importing this package imports no torch: the
engine and its dependencies are imported when a local deployment is created."""

from __future__ import annotations

from providers.base import Provider
from providers.local.options import LocalOptions

__all__ = ["LocalOptions", "create"]


def create(deployment: str, options: LocalOptions, credential: str | None) -> Provider:
    from providers.local.provider import LocalProvider  # torch and transformers load here, not at start-up

    return LocalProvider(deployment, options)
