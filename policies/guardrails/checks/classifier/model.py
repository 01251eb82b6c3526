"""The `classifier` check's runtime: a Hugging Face sequence-classification model and its tokenizer.

Imported only in the check's worker thread, the first time a text is classified, so that torch and
transformers (the ``local`` extra) are loaded only when a policy uses the check. Every call runs in
that one thread: loading, tokenising, and each forward pass.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer
from transformers.utils import logging as transformers_logging

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# transformers' loading is not thread-safe (two models built at once can be left on the meta device);
# classifier checks load one at a time. The local engine has its own lock: see docs/guardrails.md.
CLASSIFIER_LOADING = threading.Lock()


@dataclass(frozen=True, slots=True)
class Scored:
    """One text's label probabilities, per window of at most `max_length` tokens."""

    windows: list[list[float]]
    too_long: bool = False  # more windows than `max_windows`: only the first ones were scored


class Runtime:
    def __init__(
        self,
        folder: str,
        *,
        device: str,
        dtype: str,
        max_length: int,
        stride: int,
        max_windows: int,
        max_batch: int,
    ) -> None:
        transformers_logging.disable_progress_bar()
        self.device = torch.device(_device(device))
        chosen = _DTYPES.get(dtype, torch.float32 if self.device.type == "cpu" else torch.float16)
        with CLASSIFIER_LOADING:
            self.tokenizer = AutoTokenizer.from_pretrained(folder)
            model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=chosen)
        self.model = model.to(self.device).eval()
        limit = getattr(self.model.config, "max_position_embeddings", None)
        self.max_length = min(max_length, limit) if isinstance(limit, int) and limit > 8 else max_length
        self.stride = min(stride, self.max_length // 2)
        self.max_windows = max_windows
        self.max_batch = max_batch
        self.multi_label = self.model.config.problem_type == "multi_label_classification"

    def classify(self, texts: list[str]) -> list[Scored]:
        """Each text's label probabilities per window (softmax; sigmoid for a multi-label model)."""
        encoded = self.tokenizer(
            texts,
            truncation=True,
            max_length=self.max_length,
            stride=self.stride,
            return_overflowing_tokens=True,
            padding=True,
            return_tensors="pt",
        )
        owners: list[int] = encoded.pop("overflow_to_sample_mapping").tolist()
        counts = [0] * len(texts)
        keep: list[int] = []
        for row, owner in enumerate(owners):
            counts[owner] += 1
            if counts[owner] <= self.max_windows:
                keep.append(row)
        inputs = {name: tensor[keep] for name, tensor in encoded.items() if name in _MODEL_INPUTS}
        probabilities: list[list[float]] = []
        with torch.inference_mode():
            for start in range(0, len(keep), self.max_batch):
                batch = {
                    name: tensor[start : start + self.max_batch].to(self.device) for name, tensor in inputs.items()
                }
                logits = self.model(**batch).logits.float()
                probs = torch.sigmoid(logits) if self.multi_label else torch.softmax(logits, dim=-1)
                probabilities += probs.cpu().tolist()
        scored: list[list[list[float]]] = [[] for _ in texts]
        for row, window in zip(keep, probabilities, strict=True):
            scored[owners[row]].append(window)
        return [Scored(windows, count > self.max_windows) for windows, count in zip(scored, counts, strict=True)]


_MODEL_INPUTS = frozenset({"input_ids", "attention_mask", "token_type_ids"})


def _device(name: str) -> str:
    if name != "auto":
        return name
    if torch.cuda.is_available():
        return "cuda"
    return "mps" if torch.backends.mps.is_available() else "cpu"
