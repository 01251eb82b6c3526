"""The local engine's text handling on its own: incremental detokenisation and stop strings."""

from __future__ import annotations

from typing import Any

import pytest

transformers = pytest.importorskip("transformers", reason="the local engine needs the 'local' extra")

from providers.local.text.detokenizer import IncrementalDetokenizer, token_text  # noqa: E402
from providers.local.text.stops import StopMatcher  # noqa: E402
from tests.support.local_model import random_model_dir  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return transformers.AutoTokenizer.from_pretrained(random_model_dir())


def test_characters_split_over_tokens_come_out_whole(tokenizer: Any) -> None:
    text = "the 日本 😀 ∑ sky"
    ids = tokenizer.encode(text)
    detokenizer = IncrementalDetokenizer(tokenizer)

    pieces = [detokenizer.add(token) for token in ids]

    assert len(ids) > len(text.split())  # the rare characters really are split into byte tokens
    assert "".join(pieces) == text
    assert "" in pieces  # a token that only starts a character releases nothing yet
    assert not any("\ufffd" in piece for piece in pieces)


def test_bytes_that_never_form_a_character_are_dropped(tokenizer: Any) -> None:
    lone_lead, space = tokenizer.encode("日")[0], tokenizer.encode(" ")[0]
    detokenizer = IncrementalDetokenizer(tokenizer, tokenizer.encode("the"))

    assert detokenizer.add(lone_lead) == ""
    assert detokenizer.add(space) == " "


def test_a_partial_character_token_is_shown_as_bytes_in_logprobs(tokenizer: Any) -> None:
    lead = tokenizer.encode("日")[0]

    assert token_text(tokenizer, lead) == "bytes:\\xe6"
    assert token_text(tokenizer, tokenizer.encode(" sky")[0]) == " sky"


def test_stop_string_across_pieces_is_never_shown() -> None:
    matcher = StopMatcher(["lo w", "zzz"])

    shown = [matcher.feed("hel"), matcher.feed("lo wo")]

    assert shown == ["he", "l"]
    assert matcher.stopped


def test_held_text_that_was_not_a_stop_string_is_released() -> None:
    matcher = StopMatcher(["abc"])

    assert matcher.feed("xab") == "x"
    assert matcher.feed("d") == "abd"
    assert matcher.feed("ab") == ""
    assert matcher.flush() == "ab"
    assert not matcher.stopped
