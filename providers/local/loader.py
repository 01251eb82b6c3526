"""Load a Hugging Face causal LM and its tokenizer: device, dtype and thread count chosen here.

Called in the engine's worker thread, so a slow load (a large model, a hub download) never holds
the event loop; torch and transformers are imported only then.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase
from transformers.utils import logging as transformers_logging

from providers.local.chat_tokens import SpecialTokens
from providers.local.options import LocalOptions

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# Fill-in-the-middle token spellings (StarCoder / SantaCoder, CodeLlama-style, Qwen-coder).
_FIM_SPELLINGS = (
    ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),
    ("<fim-prefix>", "<fim-suffix>", "<fim-middle>"),
    ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
    ("▁<PRE>", "▁<SUF>", "▁<MID>"),
)


# transformers' loading is not thread-safe (two models built at once can be left on the meta device:
# huggingface/transformers#41782, and what went wrong stays wrong for every later load): deployments
# whose workers start together load one at a time, and so must anything else in the process that
# loads a model while they may (a test's reference model).
MODEL_LOADING = threading.Lock()


@dataclass(frozen=True, slots=True)
class FimTokens:
    prefix: int
    suffix: int
    middle: int


@dataclass(frozen=True, slots=True)
class LoadedModel:
    model: Any  # a transformers PreTrainedModel with a causal LM head
    tokenizer: PreTrainedTokenizerBase
    device: torch.device
    dtype: torch.dtype
    context_length: int
    vocab_size: int  # rows of the LM head: every id a logit exists for
    eos_token_id: int  # the tokenizer's end-of-text: also the separator of documents in a prompt
    # Every token that ends an answer: the tokenizer's end-of-text and the ids the model's config and
    # generation config name (chat models list several, e.g. an end-of-turn beside end-of-text).
    stop_token_ids: frozenset[int]
    fim: FimTokens | None
    fingerprint: str  # `system_fingerprint`: changes when the weights, dtype or torch change
    # The most bytes of text one token covers (its vocabulary spelling's UTF-8 length, which is
    # never less: byte-level BPE spells a byte with one or two, SentencePiece a space with three):
    # a text of B bytes is at least B / max_token_bytes tokens, known before tokenising it.
    max_token_bytes: int
    special_tokens: SpecialTokens  # what a chat message may spell but never becomes (chat_tokens)


def load(options: LocalOptions) -> LoadedModel:
    torch.set_num_threads(thread_count(options.threads))
    transformers_logging.disable_progress_bar()
    device = pick_device(options.device)
    dtype = pick_dtype(options.dtype, device)
    with MODEL_LOADING:
        tokenizer = AutoTokenizer.from_pretrained(options.model, revision=options.revision)
        model = AutoModelForCausalLM.from_pretrained(options.model, revision=options.revision, dtype=dtype)
        model.to(device)
    model.eval()
    stops = end_tokens(tokenizer.eos_token_id, model.config, getattr(model, "generation_config", None))
    if not stops:
        raise ValueError("the model has no end-of-text token (eos_token_id)")
    eos = tokenizer.eos_token_id if isinstance(tokenizer.eos_token_id, int) else stops[0]
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        device=device,
        dtype=dtype,
        context_length=context_length(model.config, options.max_context),
        vocab_size=int(model.get_output_embeddings().weight.shape[0]),
        eos_token_id=eos,
        stop_token_ids=frozenset(stops),
        fim=fim_tokens(tokenizer),
        fingerprint=_fingerprint(model.config.to_json_string(), dtype, model),
        max_token_bytes=max_token_bytes(tokenizer),
        special_tokens=SpecialTokens.of(tokenizer),
    )


def end_tokens(tokenizer_eos: int | None, *configs: Any) -> list[int]:
    """The end-of-text ids of the tokenizer and of each config (an id or a list of ids), in order."""
    found = [tokenizer_eos] if isinstance(tokenizer_eos, int) else []
    for config in configs:
        named = getattr(config, "eos_token_id", None)
        for token in named if isinstance(named, list | tuple) else [named]:
            if isinstance(token, int) and not isinstance(token, bool) and token >= 0 and token not in found:
                found.append(token)
    return found


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def thread_count(requested: int | None) -> int:
    cores = available_cores()
    return cores if requested is None else min(requested, cores)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} was asked for, but torch sees no CUDA device")
    return device


def pick_dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        # Half precision on CPU is slow and inexact in many kernels: float32 there.
        return torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
    return _DTYPES[name]


def context_length(config: Any, limit: int | None) -> int:
    own = next(
        (
            value
            for name in ("max_position_embeddings", "n_positions", "n_ctx", "seq_length")
            if isinstance(value := getattr(config, name, None), int)
        ),
        None,
    )
    if own is None and limit is None:
        raise ValueError("the model's config names no context length: set provider.max_context")
    return min(value for value in (own, limit) if value is not None)


def fim_tokens(tokenizer: PreTrainedTokenizerBase) -> FimTokens | None:
    vocabulary = tokenizer.get_vocab()
    for spelling in _FIM_SPELLINGS:
        if all(token in vocabulary for token in spelling):
            prefix, suffix, middle = (vocabulary[token] for token in spelling)
            return FimTokens(prefix, suffix, middle)
    return None


def max_token_bytes(tokenizer: PreTrainedTokenizerBase) -> int:
    return max((len(token.encode("utf-8", "surrogatepass")) for token in tokenizer.get_vocab()), default=1) or 1


def _fingerprint(config_json: str, dtype: torch.dtype, model: Any) -> str:
    digest = hashlib.sha256(config_json.encode())
    digest.update(f"{dtype}|{torch.__version__}|{model.num_parameters()}".encode())
    return "fp_local_" + digest.hexdigest()[:10]
