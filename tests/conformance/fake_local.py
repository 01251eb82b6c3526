"""The local engine's stand-in for a fake API: it serves nothing (the engine runs in the gateway),
and its 'model' is the scripted tiny model (with a chat template), which answers `answer 0 to` to
every prompt and every chat at any temperature, so the shared cases know the text to expect."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.conformance.fake_api import FakeAPI, Generation, generate
from tests.support.local_model import SCRIPTED_TEXT, scripted_chat_model_dir


@dataclass
class LocalModelFake(FakeAPI):
    model_dir: Path = field(default_factory=Path)

    @classmethod
    def start(cls) -> LocalModelFake:
        pytest.importorskip("torch", reason="the local engine needs the 'local' extra")
        return cls(model_dir=scripted_chat_model_dir())

    @staticmethod
    def provider_block(fake: FakeAPI) -> dict[str, Any]:
        assert isinstance(fake, LocalModelFake)
        return {"type": "local", "model": str(fake.model_dir), "threads": 1}  # tests run torch on one thread

    def add_routes(self, app: web.Application) -> None:
        """No routes: nothing is ever called."""

    def generate(
        self, prompt: str, sample: int = 0, max_tokens: int | None = 16, stop: list[str] | None = None
    ) -> Generation:
        return generate(prompt, sample, max_tokens, stop, answer=SCRIPTED_TEXT)
