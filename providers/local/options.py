"""The `provider:` block of a `type: local` deployment: which model, where it runs, how much it serves.

Checking it imports nothing heavy: torch and transformers are looked up, not imported, so a config
with a local deployment is validated in milliseconds and fails early when the extra is missing.
"""

from __future__ import annotations

import importlib.util
from typing import Annotated, Literal

from pydantic import Field, model_validator

from providers.request_bounds import BoundedOptions

INSTALL_HINT = "pip install 'llm-gateway[local]'"  # or, in a checkout: pip install -e '.[local]'


class LocalOptions(BoundedOptions):
    # A folder holding a Hugging Face causal LM (config, weights, tokenizer), or a hub id when
    # the machine can reach a hub.
    model: Annotated[str, Field(min_length=1)]
    device: Annotated[str, Field(pattern=r"^(auto|cpu|cuda(:\d+)?|mps)$")] = "auto"  # auto: cuda when present
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"  # auto: float32 on cpu, bfloat16 on cuda
    # torch's intra-op threads; unset: every core this process may use, and never more than that.
    threads: Annotated[int, Field(ge=1)] | None = None
    max_batch: Annotated[int, Field(ge=1, le=1024)] = 16  # sequences decoded together in one forward pass
    # Sequences (prompts * best_of) waiting for a batch slot; a request that would pass it gets a 429
    # (one larger than the whole queue is taken when nothing waits).
    max_queue: Annotated[int, Field(ge=1)] = 256
    # max_sequences_per_request, max_tokens_per_request (BoundedOptions): so that no request holds
    # the engine for everyone.
    retry_after_s: Annotated[int, Field(ge=1)] = 1  # the Retry-After of that 429
    # Tokens of context, when lower than the model's own (to bound memory); unset: the model's.
    max_context: Annotated[int, Field(ge=1)] | None = None
    revision: str | None = None  # a hub revision (branch, tag or commit)
    # An encoder folder: `dimensions` shortens its vectors (a model trained for it, Matryoshka-style);
    # false: a 400 naming `dimensions`.
    embedding_shortening: bool = False

    @model_validator(mode="after")
    def _extra_installed(self) -> LocalOptions:
        missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
        if missing:
            raise ValueError(f"the local provider needs {' and '.join(missing)}: {INSTALL_HINT}")
        return self
