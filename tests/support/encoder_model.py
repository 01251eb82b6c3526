"""Tiny BERT encoders in sentence-transformers' layout, built offline in a folder in well under a second.

A WordPiece vocabulary of a few dozen words, a 2-layer BertModel with seeded weights (saved with
`save_pretrained`, as a user's model is) and the sentence-transformers files: `modules.json`,
`1_Pooling/config.json` (mean, CLS or last-token pooling), `sentence_bert_config.json`
(`max_seq_length`) and, when asked, a Normalize module.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path

from tests.support.local_model import one_load_at_a_time

MAX_SEQ_LENGTH = 24  # the context the folder declares, below the model's 64 positions
VOCABULARY = [  # the words of the tiny encoders' WordPiece vocabulary (the embeddings bench's texts too)
    "the",
    "cat",
    "sat",
    "on",
    "mat",
    "a",
    "dog",
    "ran",
    "in",
    "park",
    "sky",
    "is",
    "blue",
    "red",
    "apples",
    "green",
    "pears",
    "grow",
    "hello",
    "world",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
]
_SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_MODES = {"mean": "pooling_mode_mean_tokens", "cls": "pooling_mode_cls_token", "lasttoken": "pooling_mode_lasttoken"}


@functools.cache
@one_load_at_a_time
def encoder_dir(pooling: str = "mean", normalize: bool = True, *, hidden: int = 32, layers: int = 2) -> Path:
    """A folder per (pooling, normalize, size), built once per session and removed at exit. The
    default size is the tests'; the benchmark asks for a MiniLM-like 384 x 6."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = Path(tempfile.mkdtemp(prefix=f"tiny-encoder-{pooling}-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join([*_SPECIAL, *VOCABULARY, *(f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz")]) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(7)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4 if hidden < 128 else hidden // 64,
        intermediate_size=64 if hidden < 128 else 4 * hidden,
        max_position_embeddings=64,
    )
    BertModel(config).eval().save_pretrained(folder)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        (folder / "2_Normalize").mkdir()
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir()
    pooling_config = {"word_embedding_dimension": hidden, **{key: mode == pooling for mode, key in _MODES.items()}}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling_config))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": MAX_SEQ_LENGTH}))
    return folder
