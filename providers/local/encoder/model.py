"""A Hugging Face encoder folder in sentence-transformers' layout, loaded and run as that library would.

`modules.json` lists the pipeline: the Transformer (the folder itself), a Pooling module whose
`config.json` says how token vectors become one (`pooling_mode_mean_tokens`, `_cls_token`,
`_lasttoken`), and an optional Normalize (unit length). `sentence_bert_config.json`'s
`max_seq_length` is the context, lowered by the model's positions, the tokenizer's own limit and
`max_context`. A folder is an encoder when it has `modules.json` (`providers.local.is_encoder_folder`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModel, AutoTokenizer, PreTrainedTokenizerBase

from providers.local.loader import MODEL_LOADING, pick_device, pick_dtype, thread_count
from providers.local.options import LocalOptions

POOLING_MODES = ("mean", "cls", "lasttoken")
_NORMALIZE = "sentence_transformers.models.Normalize"
_POOLING = "sentence_transformers.models.Pooling"
_TOKENIZER_UNBOUNDED = 10**9  # tokenizers without a limit say 1e30


@dataclass(frozen=True, slots=True)
class LoadedEncoder:
    model: Any
    tokenizer: PreTrainedTokenizerBase
    device: torch.device
    pooling: str  # one of POOLING_MODES
    normalize: bool
    context_length: int  # tokens of one input, special tokens included
    width: int  # the embedding's dimensions
    vocab_size: int
    pad_token_id: int
    prefix: tuple[int, ...]  # the tokenizer's markers around a text ([CLS] … [SEP]), put around token-id inputs
    suffix: tuple[int, ...]

    def with_special_tokens(self, ids: list[int]) -> list[int]:
        """Token ids as the model reads them: wrapped in the tokenizer's own markers, as a text would be."""
        return [*self.prefix, *ids, *self.suffix]

    def encode_text(self, text: str) -> list[int]:
        ids: list[int] = self.tokenizer(text, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
        return ids

    @torch.inference_mode()
    def embed(self, batch: list[list[int]]) -> list[list[float]]:
        """One forward pass over `batch` (padded to its longest), pooled and normalized as configured."""
        longest = max(len(ids) for ids in batch)
        input_ids = torch.full((len(batch), longest), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(batch), longest), dtype=torch.long)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            mask[row, : len(ids)] = 1
        input_ids, mask = input_ids.to(self.device), mask.to(self.device)
        hidden = self.model(input_ids=input_ids, attention_mask=mask).last_hidden_state.float()
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        elif self.pooling == "lasttoken":
            last = mask.sum(dim=1) - 1
            pooled = hidden[torch.arange(len(batch), device=hidden.device), last]
        else:
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
        if self.normalize:
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
        vectors: list[list[float]] = pooled.cpu().tolist()
        return vectors


def load_encoder(options: LocalOptions) -> LoadedEncoder:
    torch.set_num_threads(thread_count(options.threads))
    folder = Path(options.model)
    modules = json.loads((folder / "modules.json").read_text())
    pooling_path = next((m.get("path", "") for m in modules if m.get("type") == _POOLING), None)
    if pooling_path is None:
        raise ValueError("modules.json names no Pooling module")
    pooling = _pooling_mode(json.loads((folder / pooling_path / "config.json").read_text()))
    normalize = any(m.get("type") == _NORMALIZE for m in modules)
    device = pick_device(options.device)
    dtype = pick_dtype(options.dtype, device)
    with MODEL_LOADING:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModel.from_pretrained(folder, dtype=dtype)
        model.to(device)
    model.eval()
    config = model.config
    limits = [options.max_context or _TOKENIZER_UNBOUNDED, _positions(config)]
    limits.append(min(int(tokenizer.model_max_length), _TOKENIZER_UNBOUNDED))
    st_config = folder / "sentence_bert_config.json"
    if st_config.is_file():
        max_seq_length = json.loads(st_config.read_text()).get("max_seq_length")
        if isinstance(max_seq_length, int):
            limits.append(max_seq_length)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    prefix, suffix = _markers(tokenizer)
    return LoadedEncoder(
        model=model,
        tokenizer=tokenizer,
        device=device,
        pooling=pooling,
        normalize=normalize,
        context_length=min(limits),
        width=int(config.hidden_size),
        vocab_size=int(config.vocab_size),
        pad_token_id=int(pad),
        prefix=prefix,
        suffix=suffix,
    )


def _markers(tokenizer: PreTrainedTokenizerBase) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """What the tokenizer adds before and after a text's tokens, found by encoding one with and without."""
    plain: list[int] = tokenizer("a", add_special_tokens=False)["input_ids"]
    full: list[int] = tokenizer("a", add_special_tokens=True)["input_ids"]
    for start in range(len(full) - len(plain) + 1):
        if full[start : start + len(plain)] == plain:
            return tuple(full[:start]), tuple(full[start + len(plain) :])
    return (), ()


def _pooling_mode(config: dict[str, Any]) -> str:
    chosen = [mode for mode in POOLING_MODES if config.get(_POOLING_KEYS[mode])]
    others = [key for key, value in config.items() if key.startswith("pooling_mode") and value and key not in _KEYS]
    if len(chosen) != 1 or others:
        raise ValueError(f"1_Pooling/config.json must choose one of {', '.join(POOLING_MODES)} pooling")
    return chosen[0]


_POOLING_KEYS = {
    "mean": "pooling_mode_mean_tokens",
    "cls": "pooling_mode_cls_token",
    "lasttoken": "pooling_mode_lasttoken",
}
_KEYS = frozenset(_POOLING_KEYS.values())


def _positions(config: Any) -> int:
    """Positions the model can read; RoBERTa-style models reserve the first two (padding offset)."""
    positions = int(getattr(config, "max_position_embeddings", _TOKENIZER_UNBOUNDED))
    if getattr(config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
        positions -= 2
    return positions
