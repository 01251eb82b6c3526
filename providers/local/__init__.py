"""The in-process inference engine (`type: local`). Importing this package imports no torch: the
engine and its dependencies are imported when a local deployment is created."""

from __future__ import annotations

from pathlib import Path

from providers.base import Provider
from providers.local.options import LocalOptions

__all__ = ["LocalOptions", "create", "is_encoder_folder"]


def create(deployment: str, options: LocalOptions, credential: str | None) -> Provider:
    if is_encoder_folder(options.model):  # a sentence-transformers folder: the Embeddings API
        from providers.local.encoder.provider import LocalEncoderProvider

        return LocalEncoderProvider(deployment, options)
    from providers.local.provider import LocalProvider  # torch and transformers load here, not at start-up

    return LocalProvider(deployment, options)


def is_encoder_folder(model: str) -> bool:
    """A folder in sentence-transformers' layout (its `modules.json`) holds an encoder to embed with."""
    return (Path(model) / "modules.json").is_file()
