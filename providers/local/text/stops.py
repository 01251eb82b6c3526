"""Stop strings over text that arrives piece by piece.

Text that could be the start of a stop string is held back until it is known not to be: a stream
never shows a prefix of a stop string that then completes, and a stream and a plain answer cut
the text at the same place.
"""

from __future__ import annotations

from collections.abc import Sequence


class StopMatcher:
    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(stop for stop in stops if stop)
        self._held = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        """The text that can be shown now; sets `stopped` when a stop string completed (the text
        before it is returned, the stop string and anything after it never are)."""
        if not self._stops:
            return text
        pending = self._held + text
        hits = [at for stop in self._stops if (at := pending.find(stop)) >= 0]
        if hits:
            self.stopped = True
            self._held = ""
            return pending[: min(hits)]
        keep = self._longest_stop_prefix_at_end(pending)
        self._held = pending[len(pending) - keep :] if keep else ""
        return pending[: len(pending) - keep]

    def flush(self) -> str:
        """At the end of the text: what was held back was not a stop string after all."""
        held, self._held = self._held, ""
        return held

    def _longest_stop_prefix_at_end(self, text: str) -> int:
        longest = 0
        for stop in self._stops:
            for size in range(min(len(stop) - 1, len(text)), longest, -1):
                if text.endswith(stop[:size]):
                    longest = size
                    break
        return longest
