"""The one scrubber: what an upstream said is cleared of every credential the gateway knows before
any of it reaches a client, a log line or a metric label.

Every upstream-derived text of a failure (each field of a 4xx envelope, a 5xx or non-JSON body, a
stream's error event, a redirect's target, a content type) passes through here where the provider
turns it into a `GatewayError` (`providers.upstream.errors`, `providers.translated.adapter.answer_error`);
everything downstream (the answer, SSE error frames, log lines, the access log's `error`, metric
labels) only ever sees that error. Successful answers are never scanned.

A credential counts as leaked when the text holds it whole, any fragment of it of
`FRAGMENT_CHARS` (8) or more characters, or a masked echo: at least 4 of its leading characters
followed by mask characters (`*`, `…`, `•`, `.`: `sk-abc1****…9xyz`, as OpenAI and others quote a
key), or mask characters followed by its last 4; in any letter case. Anything shaped like an API key
(`sk-…`, `key_…` with a digit or a mask in it) is removed too, known or not. Text is scrubbed first
and cut afterwards (`cut`), so no cut leaves 8 characters of a secret behind.

The matcher (`SecretSet`) is a set of every 8-character window of every secret, checked by one
sliding pass (about 80 ns a character, whatever the number of secrets; a compiled alternation of
the same windows measured 10-100x slower, a trie regex 2-4x, and both take milliseconds to build).
The config's is built once per load (`gateway.keys.known_secrets`); what is learnt at run time (virtual
keys from the Redis store: once, when first used; the caller's key: from the request's context,
`REQUEST_SECRETS`, on a failure only) comes as small extra sets, checked in the same pass.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import Protocol

REDACTED = "[redacted]"
FRAGMENT_CHARS = 8  # a fragment this long (or longer) of a secret is a leak
MASKED_CHARS = 4  # leading (or trailing) characters of a secret shown around a mask
MIN_SECRET_CHARS = 4  # shorter "secrets" cannot be told from ordinary text: not matched

# Shapes of provider credentials that upstream messages sometimes quote back (even masked): a
# known prefix, then a run with a digit or a mask character in it (so that `key_expired` stays).
_KEY_LIKE = re.compile(
    r"\b(?:sk|pk|rk|key|api[-_]?key)[-_](?=[A-Za-z0-9_\-*.]*[0-9*])[A-Za-z0-9_\-*.]{6,}", re.IGNORECASE
)
_MASK = "*…•."
_MASK_RUN = re.compile(r"[*…•.]+")
# What ends a word around a mask: whitespace, quotes, brackets, separators and the mask itself.
_NOT_TOKEN = frozenset(" \t\r\n\"'`<>()[]{},;|\\") | frozenset(_MASK)


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def fold(text: str) -> str:
    """Lower case, one character for one (so that positions stay): a secret is matched whatever
    case an upstream (or a URL's host) put it in."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


class SecretSet:
    """An immutable matcher of some secrets: their 8-character windows, their 4-character heads and
    tails (for masked echoes), and the short ones whole."""

    __slots__ = ("grams", "heads", "shorts", "tails")

    def __init__(
        self,
        grams: frozenset[str] = frozenset(),
        heads: frozenset[str] = frozenset(),
        tails: frozenset[str] = frozenset(),
        shorts: frozenset[str] = frozenset(),
    ) -> None:
        self.grams = grams
        self.heads = heads
        self.tails = tails
        self.shorts = shorts

    @classmethod
    def of(cls, secrets: Iterable[str | None]) -> SecretSet:
        grams: set[str] = set()
        heads: set[str] = set()
        tails: set[str] = set()
        shorts: set[str] = set()
        for secret in secrets:
            secret = fold((secret or "").strip())
            if len(secret) < MIN_SECRET_CHARS:
                continue
            if len(secret) < FRAGMENT_CHARS:
                shorts.add(secret)
                continue
            grams.update(secret[i : i + FRAGMENT_CHARS] for i in range(len(secret) - FRAGMENT_CHARS + 1))
            heads.add(secret[:MASKED_CHARS])
            tails.add(secret[-MASKED_CHARS:])
        if not (grams or shorts):
            return EMPTY
        return cls(frozenset(grams), frozenset(heads), frozenset(tails), frozenset(shorts))

    def __bool__(self) -> bool:
        return bool(self.grams or self.shorts)

    def __or__(self, other: SecretSet) -> SecretSet:
        if not other:
            return self
        if not self:
            return other
        return SecretSet(
            self.grams | other.grams, self.heads | other.heads, self.tails | other.tails, self.shorts | other.shorts
        )


def _fragments(text: str, grams: list[frozenset[str]]) -> list[tuple[int, int]]:
    """Every 8-character window of `text` that is one of a secret's: one pass whatever the sets."""
    width = FRAGMENT_CHARS
    positions = range(len(text) - width + 1)
    if len(grams) == 1:
        only = grams[0]
        return [(i, i + width) for i in positions if text[i : i + width] in only]
    if len(grams) == 2:
        first, second = grams
        return [(i, i + width) for i in positions if (w := text[i : i + width]) in first or w in second]
    return [(i, i + width) for i in positions if any(text[i : i + width] in g for g in grams)]


def _masked(text: str, heads: frozenset[str], tails: frozenset[str]) -> list[tuple[int, int]]:
    """`head…` and `…tail` echoes: a secret's first (last) 4 characters next to a mask run."""
    found = []
    width = MASKED_CHARS
    for run in _MASK_RUN.finditer(text):
        start, end = run.span()
        before = start
        while before > 0 and text[before - 1] not in _NOT_TOKEN:
            before -= 1
        after = end
        while after < len(text) and text[after] not in _NOT_TOKEN:
            after += 1
        head = next((j for j in range(before, start - width + 1) if text[j : j + width] in heads), None)
        if head is not None:
            found.append((head, after))
        elif run.group() != "." and any(text[j : j + width] in tails for j in range(end, after - width + 1)):
            found.append((before, after))
    return found


def _spans(text: str, sets: Sequence[SecretSet]) -> list[tuple[int, int]]:
    """Where the sets' secrets (whole, fragments, masked echoes) are in `text` (`fold`ed)."""
    grams = [s.grams for s in sets if s.grams]
    found = _fragments(text, grams) if grams else []
    for secrets in sets:
        for short in secrets.shorts:
            at = text.find(short)
            while at >= 0:
                found.append((at, at + len(short)))
                at = text.find(short, at + 1)
    if grams and any(mask in text for mask in _MASK):
        heads = frozenset().union(*(s.heads for s in sets))
        tails = frozenset().union(*(s.tails for s in sets))
        found += _masked(text, heads, tails)
    return found


EMPTY = SecretSet()


def scrub_text(text: str, sets: Sequence[SecretSet]) -> str:
    """`text` with every match of the sets, and anything shaped like an API key, replaced by
    `[redacted]` (overlapping and touching matches become one)."""
    if len(text) < MIN_SECRET_CHARS:
        return text
    spans = [match.span() for match in _KEY_LIKE.finditer(text)]
    spans += _spans(fold(text), sets)
    if not spans:
        return text
    spans.sort()
    merged = [list(spans[0])]
    for start, end in spans[1:]:
        if start <= merged[-1][1]:  # overlapping or touching: one marker
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces: list[str] = []
    kept = 0
    for start, end in merged:
        pieces += (text[kept:start], REDACTED)
        kept = end
    pieces.append(text[kept:])
    return "".join(pieces)


def cut(text: str, limit: int) -> str:
    """At most about `limit` characters of scrubbed text; a `[redacted]` marker the limit falls in
    is kept whole (so that the reader sees something was removed)."""
    if len(text) <= limit:
        return text
    shown = text[:limit]
    marker = shown.rfind("[")
    if marker >= 0 and REDACTED.startswith(shown[marker:]) and text.startswith(REDACTED, marker):
        shown = text[: marker + len(REDACTED)]
    return shown.rstrip() + "…"


class RequestSecrets(Protocol):
    """What the serving side knows for the request being served: the config's credentials (and
    those learnt since), and the caller's own key."""

    def sets(self) -> tuple[SecretSet, SecretSet]:
        """(every credential the config knows, the caller's key)."""


# Set once per request where the caller is authenticated (`gateway.keys.known_secrets`); read on failures only.
REQUEST_SECRETS: ContextVar[RequestSecrets | None] = ContextVar("gateway_request_secrets", default=None)


class LearntSecrets:
    """Credentials met at run time (virtual keys from the Redis store), shared by every config
    generation; `version` changes when a new one is added, so users rebuild their merged set once."""

    def __init__(self) -> None:
        self.set = EMPTY
        self.version = 0

    def add(self, secret: str | None) -> None:
        new = SecretSet.of((secret,))
        if new.grams <= self.set.grams and new.shorts <= self.set.shorts:
            return  # nothing new (or too short to match)
        self.set = self.set | new
        self.version += 1


class Secrets:
    """One provider instance's view: its own credential(s), and, while a request is served, that
    request's (every credential of the config and learnt since, and the caller's key). The large
    set is the config's, built at load; the small ones are joined to each other on a failure only."""

    __slots__ = ("_own",)

    def __init__(self, *own: str | None) -> None:
        self._own = SecretSet.of(own)

    def sets(self) -> tuple[SecretSet, ...]:
        context = REQUEST_SECRETS.get()
        if context is None:
            return (self._own,)
        known, caller = context.sets()
        return (known, self._own | caller)

    def scrub(self, text: str) -> str:
        return scrub_text(text, self.sets())


NO_SECRETS = Secrets()


_CREDENTIAL_NAME = re.compile(r"auth|key|token|secret|passw|cookie|signature|credential", re.IGNORECASE)


def credential_headers(headers: Mapping[str, str]) -> list[str]:
    """The values of the headers whose name says they carry a credential (`Authorization`,
    `x-api-key`, `X-Custom-Token`, …): extra headers a deployment sends upstream may be one."""
    return [value for name, value in headers.items() if _CREDENTIAL_NAME.search(name)]
