"""One sequence being generated: its tokens, its text so far, and when it ends.

Each sampled token goes through the detokenizer, then the stop strings; its logprobs entry is
released with the text it belongs to, so a streamed choice and a plain one carry the same tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from providers.local.events import Delta, TokenInfo
from providers.local.request_plan import SamplingParams
from providers.local.text.detokenizer import IncrementalDetokenizer
from providers.local.text.stops import StopMatcher

TokenText = Callable[[int], str]


class Sequence:
    def __init__(
        self,
        *,
        owner: Any,  # the engine's job this sequence belongs to
        index: int,
        prompt: tuple[int, ...],
        params: SamplingParams,
        detokenizer: IncrementalDetokenizer,
        token_text: TokenText,
        text_base: int,  # characters before the completion (the echoed prompt)
        generator: Any,  # its own torch.Generator: the same seed samples the same tokens
        counts: Any = None,  # tokens sampled so far by id (a tensor), when penalties apply
        bias: Any = None,  # logit_bias as a dense tensor over the vocabulary, when given
    ) -> None:
        self.owner = owner
        self.index = index
        self.params = params
        self.tokens = list(prompt)
        self.cached = len(prompt)  # tokens whose keys and values are in the cache
        self.generator = generator
        self.counts = counts
        self.bias = bias
        self.generated = 0  # counted in usage: sampled tokens other than end-of-text
        self.finish_reason: str | None = None
        self._detokenizer = detokenizer
        self._token_text = token_text
        self._stops = StopMatcher(params.stop)
        self._base = text_base
        self._produced = 0  # completion characters decoded, stop strings included
        self._shown = 0  # completion characters released
        self._held: list[TokenInfo] = []
        self._logprob_sum = 0.0
        self._sampled = 0

    @property
    def last_token(self) -> int:
        return self.tokens[-1]

    def accept(
        self, token: int, logprob: float, top: list[tuple[int, float]] | None, stops: frozenset[int]
    ) -> Delta | None:
        """Take the sampled token; the text (and finish) it releases, or None when there is none yet."""
        self._logprob_sum += logprob
        self._sampled += 1
        if token in stops:  # an end-of-text (or end-of-turn) token: never part of the text
            return self._finish("stop", self._stops.flush())
        self.generated += 1
        self.tokens.append(token)
        if self.counts is not None:
            self.counts[token] += 1
        if self.params.logprobs is not None:
            self._held.append(self._info(token, logprob, top))
        piece = self._detokenizer.add(token)
        self._produced += len(piece)
        text = self._stops.feed(piece)
        if self._stops.stopped:
            return self._finish("stop", text)
        if self.generated >= self.params.max_tokens:
            return self._finish("length", text + self._stops.flush())
        if not text and not self._held:
            return None
        return self._release(text)

    def finish_empty(self) -> Delta:
        """max_tokens 0: the sequence ends before it samples anything."""
        return self._finish("length", "")

    def _finish(self, reason: str, text: str) -> Delta:
        self.finish_reason = reason
        if reason == "length":  # every sampled token belongs to the answer, even one with no text yet
            self._shown += len(text)
            delta = Delta(self.index, text, self._held, reason)
            self._held = []
        else:
            delta = self._release(text)
            delta.finish_reason = reason
            self._held = []  # tokens of the stop string are not part of the answer
        delta.score = self._logprob_sum / self._sampled if self._sampled else 0.0
        return delta

    def _release(self, text: str) -> Delta:
        self._shown += len(text)
        end = self._base + self._shown
        ready = [info for info in self._held if info.offset < end]
        self._held = self._held[len(ready) :]
        return Delta(self.index, text, ready)

    def _info(self, token: int, logprob: float, top: list[tuple[int, float]] | None) -> TokenInfo:
        text = self._token_text(token)
        alternatives = {self._token_text(alt): value for alt, value in top or []}
        alternatives.setdefault(text, logprob)
        return TokenInfo(text, logprob, alternatives, self._base + self._produced)
