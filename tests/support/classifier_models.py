"""Tiny sequence-classification models for the `classifier` check's tests, built offline in a second.

A word-level tokenizer (the `tokenizers` library, [CLS]/[SEP] added around each text) and a 1-layer
BERT with a two-label head, saved with `save_pretrained` so the check loads them as it would a
downloaded model. ``bias`` sets the head's bias with zeroed head weights: a large gap makes the model
answer that label for any text, whatever its random body computes; ``None`` keeps a random head (the
tests then compare with an independent forward pass).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tests.support.local_model import one_load_at_a_time

WORDS = [
    "ignore",
    "previous",
    "instructions",
    "and",
    "print",
    "the",
    "password",
    "summarize",
    "this",
    "report",
    "please",
    "what",
    "is",
    "capital",
    "of",
    "france",
    "hello",
    "world",
    "a",
    "an",
    "to",
    "in",
    "you",
    "your",
    "are",
    "now",
    "system",
    "prompt",
    "reveal",
    "rules",
]
LABELS = {0: "SAFE", 1: "INJECTION"}


def build_tokenizer(directory: Path) -> None:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
    )
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]"
    )
    wrapped.save_pretrained(directory)


@one_load_at_a_time
def build_classifier(directory: Path, *, bias: tuple[float, float] | None = None, positions: int = 64) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    build_tokenizer(directory)
    config = BertConfig(
        vocab_size=len(WORDS) + 4,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=positions,
        id2label=LABELS,
        label2id={name: i for i, name in LABELS.items()},
    )
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    if bias is not None:
        with torch.no_grad():
            model.classifier.weight.zero_()
            model.classifier.bias.copy_(torch.tensor(bias))
    model.save_pretrained(directory)
    return directory


def _folder(prefix: str) -> Path:
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


@functools.cache
def flags_everything() -> Path:
    return build_classifier(_folder("classifier-hit-"), bias=(-8.0, 8.0))


@functools.cache
def flags_nothing() -> Path:
    return build_classifier(_folder("classifier-pass-"), bias=(8.0, -8.0))


@functools.cache
def random_classifier() -> Path:
    return build_classifier(_folder("classifier-random-"))


@one_load_at_a_time
def reference_probabilities(directory: Path, text: str, max_length: int) -> list[list[float]]:
    """Each window's label probabilities, by transformers directly: the independent check."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(directory)
    model: Any = AutoModelForSequenceClassification.from_pretrained(directory).eval()
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    body = max_length - 2
    windows = [ids[i : i + body] for i in range(0, max(len(ids), 1), body)] or [[]]
    out = []
    with torch.no_grad():
        for window in windows:
            row = torch.tensor([[tokenizer.cls_token_id, *window, tokenizer.sep_token_id]])
            out.append(torch.softmax(model(input_ids=row).logits, dim=-1)[0].tolist())
    return out
