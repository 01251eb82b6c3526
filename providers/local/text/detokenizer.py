"""Incremental detokenisation: text as tokens arrive, never half a UTF-8 character.

A byte-level tokenizer may split one character over several tokens; decoding them one by one gives
replacement characters. Each new token is decoded in a short window of the tokens before it (so
tokenizers that drop a leading space per call, SentencePiece, still join words right), and text
is released only once it no longer ends in an incomplete character. Bytes that can never form a
character (a model may sample any byte) are dropped rather than shown as U+FFFD.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from transformers import PreTrainedTokenizerBase
from transformers.convert_slow_tokenizer import bytes_to_unicode

REPLACEMENT = "\ufffd"
_CONTEXT_TOKENS = 6  # tokens before the new ones decoded with them


class IncrementalDetokenizer:
    def __init__(self, tokenizer: PreTrainedTokenizerBase, context: Sequence[int] = ()) -> None:
        self._tokenizer = tokenizer
        self._ids = list(context)
        self._prefix = max(0, len(self._ids) - _CONTEXT_TOKENS)  # start of the decoding window
        self._read = len(self._ids)  # tokens up to here have been released as text

    def add(self, token: int) -> str:
        """The text that `token` completes: empty while a character is still incomplete."""
        self._ids.append(token)
        before = self._decode(self._ids[self._prefix : self._read])
        after = self._decode(self._ids[self._prefix :])
        if len(after) <= len(before) or after.endswith(REPLACEMENT):
            return ""
        self._prefix, self._read = self._read, len(self._ids)
        return after[len(before) :].replace(REPLACEMENT, "")

    def _decode(self, ids: list[int]) -> str:
        return str(self._tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False))


def token_text(tokenizer: PreTrainedTokenizerBase, token: int) -> str:
    """One token as the logprobs show it: its text, or `bytes:\\xNN…` when it is part of a character."""
    text: str = tokenizer.decode([token], skip_special_tokens=False, clean_up_tokenization_spaces=False)
    if REPLACEMENT not in text:
        return text
    raw = _token_bytes(tokenizer, token)
    return text if raw is None else "bytes:" + "".join(f"\\x{byte:02x}" for byte in raw)


def _token_bytes(tokenizer: PreTrainedTokenizerBase, token: int) -> bytes | None:
    """The bytes of a byte-level BPE token (GPT-2's printable alphabet), or of a `<0xNN>` byte token."""
    piece = tokenizer.convert_ids_to_tokens(token)
    if not isinstance(piece, str):
        return None
    if piece.startswith("<0x") and piece.endswith(">") and len(piece) == 6:
        return bytes([int(piece[3:5], 16)])
    decoder = _byte_decoder()
    if all(char in decoder for char in piece):
        return bytes(decoder[char] for char in piece)
    return None


@functools.cache
def _byte_decoder() -> dict[str, int]:
    return {char: byte for byte, char in bytes_to_unicode().items()}
