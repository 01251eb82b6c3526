"""Decoded views: text hidden in an encoding or an invisible carrier, decoded so that checks read it.

`views` finds, in one text, each plausible carrier and decodes it into a `View`:
- ``base64`` (standard or URL-safe) and ``hex`` (``69676e``, ``69 67 6e``, ``\\x69\\x67``, ``0x69 0x67``)
  runs, and ``morse`` (``.. --. -.``, words split by ``/``, ``|`` or wide gaps), kept only when they
  decode to readable text (UTF-8, mostly letters and spaces, several words): hashes, keys, UUIDs
  and file headers decode to noise and are left alone;
- ``rot13`` and ``reversed`` text, recognised by common English words in their encoded form
  (``gur``, ``lbh``; ``eht``, ``uoy``), decoded whole;
- ``leetspeak`` (``1gn0r3``): digits and symbols between letters read as the letters they imitate,
  offset for offset, so a match maps back to its characters;
- ``spaced`` letters (``i g n o r e``, ``i.g.n.o.r.e``), joined into words;
- ``hidden`` text in invisible carriers: Unicode tag characters (also read in place by folding),
  binary in two alternating zero-width or invisible-operator characters, and bytes in variation
  selectors (the "emoji smuggling" scheme);
- the carriers of `obfuscation`: more byte and number encodings (`codes`), letter ciphers, spelling
  alphabets, braille and disguised letters (`ciphers`), and split payloads put back together
  (`smuggling`).

A decoded carrier is decoded again (a carrier inside a carrier: base64 of hex, ROT13 then base64), up
to `MAX_DEPTH` layers inside the first; its views keep the outer carrier's offsets.

Each finder starts from a C-speed test (a byte translation and a `find`, a word-set lookup, a count),
so a text with no carrier costs a few microseconds. At most `MAX_VIEWS` views per text, each at most
`MAX_DECODED` characters, and `MAX_TOTAL` decoded characters in all layers, so a hostile text cannot
multiply the work.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from policies.guardrails.checks.injection.obfuscation import ciphers, codes, smuggling
from policies.guardrails.checks.injection.obfuscation.codes import Decoding
from policies.guardrails.normalize import TAG_FIRST, TAG_LAST, Folded, fold

MAX_VIEWS = 16
MAX_DECODED = 4096
MAX_TOTAL = 16384  # decoded characters per text, all layers together
MAX_DEPTH = 2  # layers decoded inside the first carrier
MIN_BASE64 = 20  # characters: shorter runs are words and identifiers
# Carriers: weighed whenever found (the others, leetspeak, spaced and split words, only when reading
# them revealed something).
ENCODED = frozenset(
    {"base64", "hex", "morse", "rot13", "reversed", "base32", "base85", "binary", "charcodes", "percent", "cipher"}
    | {"nato", "braille", "piglatin", "disguised", "reassembled", "invisible_split"}
)


@dataclass(frozen=True, slots=True)
class View:
    kind: str  # base64, hex, morse, rot13, reversed, leetspeak, spaced, hidden
    folded: Folded  # the decoded text, folded
    start: int  # the carrier's original [start, end)
    end: int
    aligned: bool = False  # the view's offsets are the text's (leetspeak): matches map back through `folded`
    depth: int = 0  # carriers around this one
    whole: bool = False  # the whole text read another way (a cipher, reversed): not a located carrier


_B64_VIEW = (
    bytes(97 if chr(i).isalnum() or chr(i) in "+/_-" else 61 if i == 61 else 32 for i in range(128)) + b" " * 128
)
_HEX_VIEW = bytes(104 if chr(i) in "0123456789abcdef" else 32 if chr(i) in " :,-" else 120 for i in range(256))
_HEX_ESCAPED = re.compile(r"(?:(?:\\x|0x)[0-9a-f]{2}[\s,;:]{0,3}){6,}")
_HEX_PLAIN = re.compile(r"[0-9a-f]{16,}|(?:[0-9a-f]{2}[ :,-]){6,}[0-9a-f]{2}")
_MORSE = re.compile(r"[.\-]{1,7}(?:[ \t]{1,3}(?:[/|][ \t]{0,3})?[.\-]{1,7}){5,}")
_MORSE_SYMBOLS = str.maketrans("\u2022\u00b7\u2219\u22c5\u2212\u2013\u2014\u2012_", "....-----")
_MORSE_DOTS = ("\u2022", "\u00b7", "\u2219", "\u22c5")  # dots drawn as bullets or middle dots
_MORSE_SIGNS = re.compile(
    "[\u2022\u00b7\u2219\u22c5][\\s\u2212\u2013\u2014\u2022\u00b7\u2219\u22c5]|[\u2212\u2013\u2014][\u2022\u00b7\u2219\u22c5]"
)
_MORSE_WORD = re.compile(r"\s*[/|]\s*|\s{2,}")
_MORSE_CODE = {
    ".-": "a", "-...": "b", "-.-.": "c", "-..": "d", ".": "e", "..-.": "f", "--.": "g", "....": "h", "..": "i",
    ".---": "j", "-.-": "k", ".-..": "l", "--": "m", "-.": "n", "---": "o", ".--.": "p", "--.-": "q", ".-.": "r",
    "...": "s", "-": "t", "..-": "u", "...-": "v", ".--": "w", "-..-": "x", "-.--": "y", "--..": "z",
    "-----": "0", ".----": "1", "..---": "2", "...--": "3", "....-": "4", ".....": "5", "-....": "6",
    "--...": "7", "---..": "8", "----.": "9", "--..--": ",", ".-.-.-": ".", ".----.": "'", "..--..": "?",
    "-.-.--": "!", "-..-.": "/", "---...": ":", "-.--.": "(", "-.--.-": ")",
}  # fmt: skip
COMMON_WORDS = frozenset(
    [
        "the",
        "and",
        "you",
        "your",
        "this",
        "that",
        "with",
        "without",
        "will",
        "from",
        "have",
        "what",
        "please",
        "how",
        "any",
        "all",
        "are",
        "not",
        "for",
        "now",
        "was",
        "can",
        "out",
        "me",
        "is",
        "it",
        "tell",
        "say",
        "write",
        "answer",
        "respond",
        "print",
        "user",
        "question",
    ]
)
_LEET_VIEW = bytes(97 if chr(i).isalpha() else 49 if chr(i) in "013457@$!|" else 32 for i in range(128)) + b" " * 128
# A digit or symbol before a letter: `re` finds this literal in prose's runs of "a" several times
# faster than `bytes.find` or `bytes.count`, which crawl through them.
_LEET_PAIR = re.compile(rb"1a")
_LEET_TOKEN = re.compile(r"[a-z0-9@$!|]*[0-9@$!|][a-z0-9@$!|]*")
_LEET = {
    "0": "o",
    "1": "i",
    "3": "e",
    "4": "a",
    "5": "s",
    "7": "t",
    "8": "b",
    "9": "g",
    "@": "a",
    "$": "s",
    "!": "i",
    "|": "l",
}
_LEET_I = str.maketrans(_LEET)
_SPACED_VIEW = (
    bytes(97 if chr(i).isalnum() else 32 if chr(i) in " .-_*|/,~+':!?" else 120 for i in range(128)) + b"x" * 128
)
_SINGLES = frozenset(bytes([c]) for c in b"abcdefghijklmnopqrstuvwxyz")
_MIN_SINGLES = 6  # one-letter words a text of spaced letters holds at least
_SPACED_HINT = b" a a a a a a"  # six single characters in a row, each after a separator
_SPACED = re.compile(r"(?<![^\W_])(?:[^\W_][ .\-_*|/,~+':!?]{1,5}){5,}[^\W_]")
_SPACED_GAP = re.compile(r" {2,}|\s*[/|]\s*|\s*[.\-_*~+]{2,}\s*")
_TAGS = re.compile(f"[{chr(TAG_FIRST)}-{chr(TAG_LAST)}]{{3,}}")
_BINARY_CARRIER = re.compile("[\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u180e]{8,}")
_SELECTORS = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]{4,}")
_NON_ASCII_RUN = re.compile(rb"\?\?\?+")  # on the text encoded with errors="replace": one "?" per character
_FLAG = "\U0001f3f4"  # a black flag: tag characters after it spell a region (England, Scotland, Wales)
# Carriers read from letters (ciphers, words cut apart, disguised letters): letters by construction,
# so not held to `readable` (words run together are not "several words").
_LETTERS_SPACE = bytes(i for i in range(128) if chr(i).isalpha() or chr(i).isspace())
_NOT_B85 = b".,'\":/\\[]?"  # punctuation base85 does not use
_NOT_QUOTE = bytes(i for i in range(256) if chr(i) not in "\"'`")
_LETTERS = frozenset({"rot13", "cipher", "piglatin", "split_words", "disguised", "invisible_split"})
_BYTES = frozenset({"base64", "hex", "base32", "base85", "binary", "charcodes", "percent", "hidden"})  # decoded again
_REVERSAL = frozenset(
    b"reversed reverse backwards backward mirror mirrored inverse inverted invertido invertida umgekehrt "
    b"ruckwarts rovescio invertito achterstevoren odwrotnie".split()
)


class Hints:
    """Facts of one text that the finders' gates read, from a few C-speed passes: its ASCII
    punctuation in order (a character beyond ASCII shows as ``?``), how many numbers follow another
    number (``12 34``: code points, bits and hex pairs come so), whether it holds a run of 16
    letters and digits (base64, base32 and hex carriers do), whether its source is all ASCII (no
    invisible carrier, braille cell or disguised letter then), and which of its words any word-gated
    finder reads (`hits`: one intersection with the union of their word sets, where each finder
    would intersect the text's words with its own)."""

    __slots__ = ("hits", "pairs", "plain", "runs", "symbols")

    def __init__(self, folded: Folded, gate_words: frozenset[bytes] = frozenset()) -> None:
        view = folded.ascii
        self.plain = folded.source.isascii()
        self.hits = folded.words & gate_words
        rest = view.translate(None, _LETTERS_SPACE)  # digits and punctuation
        self.symbols = rest.translate(None, b"0123456789")
        self.pairs = 0
        if len(rest) - len(self.symbols) >= 6:  # twelve digits at least make six pairs
            numbers = view.translate(codes.NUMBER_VIEW)
            self.pairs = numbers.count(b"d d") + numbers.count(b"d  d")
        self.runs = view.translate(_B64_VIEW).find(b"a" * 16) != -1


Finder = Callable[[Folded], Sequence["View | Decoding"]]
Gate = Callable[[Hints, Folded], bool]


def _always(hints: Hints, folded: Folded) -> bool:
    return True


def _runs(hints: Hints, folded: Folded) -> bool:
    return hints.runs


def _may_split(hints: Hints, folded: Folded) -> bool:
    """Words broken by separators, cut by spaces or by characters folded away: separators, odd short
    words, or an uneven folding."""
    separators = hints.symbols.count(b"-") + hints.symbols.count(b"|") + hints.symbols.count(b"*")
    return separators >= smuggling.MIN_BROKEN or not folded.even or len(hints.hits & smuggling.ODD_SHORT) >= 4


def _not_ascii(hints: Hints, folded: Folded) -> bool:
    """Invisible carriers, braille cells and disguised letters are characters beyond ASCII."""
    return not hints.plain


class Decoder:
    """The views of texts, given the words that matter: the checks' vocabulary recognises ROT13 and
    reversed text (common and vocabulary words in their encoded form) and picks, in leetspeak, the
    reading of an ambiguous ``1`` or ``|`` (``i`` or ``l``) that makes a known word."""

    def __init__(self, vocabulary: frozenset[str] = frozenset()) -> None:
        words = COMMON_WORDS | vocabulary | ciphers.REQUEST_WORDS | ciphers.FUNCTION_WORDS
        known = {w for w in words if w.isascii() and w.isalpha() and len(w) > 2}
        self._known = frozenset(known)
        self._reversed = frozenset(w[::-1].encode() for w in known if w[::-1] not in known)
        self._shifts = ciphers.ShiftIndex(self._known)
        self._pig = ciphers.PigLatin(self._known)
        self._splits = smuggling.WordSplits(self._known)
        # The words the word-gated finders look for, read from a text in one intersection (`Hints.hits`).
        self._gate_words = (
            self._shifts.keys | self._reversed | _REVERSAL | ciphers.NATO_WORDS | _SINGLES | smuggling.ODD_SHORT
        )
        # Each finder with the gate it must pass: facts of the text (`Hints`) that its carrier cannot
        # lack, so that an ordinary prompt pays for a few counts, not for every finder's own passes.
        # A gate only skips what the finder would refuse by the same test.
        self._finders: tuple[tuple[Finder, Gate], ...] = (
            (_base64, _runs),
            (_hex, lambda h, f: h.runs or h.pairs >= 5 or h.symbols.count(b"\\") >= 6),
            (codes.base32, _runs),
            (codes.base85, lambda h, f: b"<~" in h.symbols or len(h.symbols.translate(None, _NOT_B85)) >= 8),
            (codes.binary, lambda h, f: h.runs or h.pairs >= 5),
            (codes.charcodes, lambda h, f: h.pairs >= 7 or h.symbols.count(b"&") + h.symbols.count(b"\\") >= 4),
            (codes.percent, lambda h, f: h.symbols.count(b"%") >= 4 or h.symbols.count(b"=") >= 6),
            (_morse, lambda h, f: h.symbols.count(b"-") >= 8 or b"?" in h.symbols),
            (self._shifts.find, lambda h, f: len(h.hits & self._shifts.keys) >= ciphers.MIN_SHIFTED),
            (self._reverse, self._may_reverse),
            (ciphers.nato, lambda h, f: len(h.hits & ciphers.NATO_WORDS) >= ciphers.MIN_NATO),
            (ciphers.braille, _not_ascii),
            (self._pig.find, _always),
            (self._leetspeak, _always),
            (_spaced, lambda h, f: len(h.hits & _SINGLES) >= _MIN_SINGLES),
            (self._splits.find, _may_split),
            (smuggling.reassembled, lambda h, f: len(h.symbols.translate(None, _NOT_QUOTE)) >= 3 or not f.even),
            (_hidden, _not_ascii),
            (ciphers.disguised, _not_ascii),
        )

    def views(self, folded: Folded) -> list[View]:
        return self._views(folded, 0, [MAX_TOTAL])

    def _views(self, folded: Folded, depth: int, budget: list[int]) -> list[View]:
        found: list[View] = []
        hints = Hints(folded, self._gate_words)
        for finder, gate in self._finders:
            if not gate(hints, folded):
                continue
            for item in finder(folded):
                found += [item] if isinstance(item, View) else self._read(item, depth, budget)
            if len(found) >= MAX_VIEWS:
                return found[:MAX_VIEWS]
        return found

    def _read(self, item: Decoding, depth: int, budget: list[int]) -> list[View]:
        """A decoded carrier's view, if it reads as text, and the views of the carriers inside it, at
        its offsets."""
        text = item.text[:MAX_DECODED]
        if not text or budget[0] < len(text):
            return []
        budget[0] -= len(text)
        folded = fold(text)
        legible = item.kind in _LETTERS or readable(text)
        found = [View(item.kind, folded, item.start, item.end, depth=depth, whole=item.whole)] if legible else []
        if depth < MAX_DEPTH and item.kind in _BYTES:  # letters hold no other carrier
            for inner in self._views(folded, depth + 1, budget):
                found.append(View(inner.kind, inner.folded, item.start, item.end, depth=inner.depth or depth + 1))
        return found

    def _may_reverse(self, hints: Hints, folded: Folded) -> bool:
        """`_reverse`'s own tests on the words: known words spelt backwards, or a word naming a reversal."""
        return len(hints.hits & self._reversed) >= max(2, len(folded.words) // 10) or not _REVERSAL.isdisjoint(
            hints.hits
        )

    def _reverse(self, folded: Folded) -> list[View]:
        """Reversed text, recognised by known words spelt backwards (at least two, and a tenth of the
        text's distinct words): the whole text reversed, and each word reversed in place; and, in a
        text that names a reversal and has a line that reads backwards, each line's words in reverse
        order (``reversed_words``, weighed only when reading them so reveals something)."""
        words = folded.words
        text = folded.text[:MAX_DECODED]
        whole = (0, len(folded.source))
        found = []
        if len(words & self._reversed) >= max(2, len(words) // 10):
            each = " ".join(word[::-1] for word in text.split(" "))
            found += [
                View("reversed", fold(text[::-1]), *whole, whole=True),
                View("reversed", fold(each), *whole, whole=True),
            ]
        if not _REVERSAL.isdisjoint(words) and _reversed_line(folded.source):
            lines = "\n".join(" ".join(reversed(line.split())) for line in text.split("\n"))
            found.append(View("reversed_words", fold(lines), *whole, whole=True))
        return found

    def _leetspeak(self, folded: Folded) -> list[View]:
        """Digits and symbols between letters read as letters, offset for offset; an ambiguous one
        (``1``, ``!``, ``|``) as whichever of ``i`` and ``l`` makes a known word."""
        marks = folded.ascii.translate(_LEET_VIEW)
        if len(_LEET_PAIR.findall(marks)) < 3 or (marks.find(b"1aa") == -1 and marks.find(b"a1a") == -1):  # "1gn0r3"
            return []
        text = folded.text
        parts: list[str] = []
        done = 0
        for token in _LEET_TOKEN.finditer(text):
            parts.append(text[done : token.start()])
            parts.append(self._read_leet(token.group()))
            done = token.end()
        parts.append(text[done:])
        view = Folded("".join(parts), folded.source, folded.even)
        return [View("leetspeak", view, 0, len(folded.source), aligned=True, whole=True)]

    def _read_leet(self, token: str) -> str:
        plain = token.translate(_LEET_I)
        ambiguous = [i for i, c in enumerate(token) if c in "1!|"]
        if not ambiguous or len(ambiguous) > 4:
            return plain
        for choice in range(1 << len(ambiguous)):
            letters = list(plain)
            for bit, at in enumerate(ambiguous):
                letters[at] = "l" if choice >> bit & 1 else "i"
            candidate = "".join(letters)
            if candidate.strip("'\".,;:?()") in self._known:
                return candidate
        return plain


def readable(text: str, min_words: int = 3) -> bool:
    """Mostly letters and spaces, in several words, no control characters: decoded prose, not noise."""
    if len(text) < 12 or any(c < " " and c not in "\n\t\r" for c in text):
        return False
    letters = sum(c.isalpha() for c in text)
    spaces = sum(c.isspace() for c in text)
    return (letters + spaces) >= 0.8 * len(text) and len(text.split()) >= min_words and letters >= 0.6 * len(text)


def _reversed_line(source: str) -> bool:
    """A line of four words or more that opens in lower case and ends with a capitalised word: a
    sentence whose word order was reversed."""
    for line in source.splitlines()[:32]:
        words = re.split(r"[.:!?]\s", line)[-1].split()  # the line's last sentence
        if len(words) >= 4 and words[0][:1].islower() and words[-1][:1].isupper() and words[-1].isalpha():
            return True
    return False


def _decoded(kind: str, raw: bytes, start: int, end: int) -> Decoding | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return Decoding(kind, text, start, end)


def _base64(folded: Folded) -> list[Decoding]:
    source = folded.source
    runs = source.encode("ascii", "replace").translate(_B64_VIEW)  # offsets are the source's
    found: list[Decoding] = []
    start = runs.find(b"a" * MIN_BASE64)
    while start != -1 and len(found) < MAX_VIEWS:
        end = runs.find(b" ", start)
        end = len(runs) if end == -1 else end
        view = _base64_run(source[start:end], start, end)
        if view is not None:
            found.append(view)
        start = runs.find(b"a" * MIN_BASE64, end)
    return found


def _base64_run(token: str, start: int, end: int) -> Decoding | None:
    body = token.rstrip("=")
    if not (any(c.isupper() for c in body) and any(c.islower() for c in body)):
        return None  # encoded text mixes cases; words, hex digests and numbers do not
    body = body[: len(body) - len(body) % 4] if len(body) % 4 == 1 else body
    padded = body + "=" * (-len(body) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return None
    return _decoded("base64", raw, start, end)


def _hex(folded: Folded) -> list[Decoding]:
    """Runs of hex digits, plain (``69676e``), in pairs (``69 67 6e``) or escaped (``\\x69\\x67``,
    ``0x69 0x67``), found on one translated view with long needles (C-speed `find`)."""
    view = folded.ascii
    found: list[Decoding] = []
    escaped = [at for at in (view.find(b"\\x"), view.find(b"0x")) if at != -1]
    if escaped and view.count(b"\\x") + view.count(b"0x") >= 6:  # six escaped bytes at least
        found += _hex_matches(folded, _HEX_ESCAPED, min(escaped))
    marks = view.translate(_HEX_VIEW)
    plain = [at for at in (marks.find(b"h" * 16), marks.find(b"hh hh hh hh hh hh")) if at != -1]
    if plain:
        found += _hex_matches(folded, _HEX_PLAIN, min(plain))
    return found


def _hex_matches(folded: Folded, pattern: re.Pattern[str], at: int) -> list[Decoding]:
    found: list[Decoding] = []
    for match in pattern.finditer(folded.text, at):
        digits = re.sub(r"\\x|0x|[^0-9a-f]", "", match.group())
        if len(digits) % 2:
            digits = digits[:-1]
        view = _decoded("hex", bytes.fromhex(digits), *folded.span(*match.span()))
        if view is not None:
            found.append(view)
        if len(found) >= MAX_VIEWS:
            break
    return found


def _morse(folded: Folded) -> list[View]:
    text = folded.text
    if not text.isascii() and any(dot in text for dot in _MORSE_DOTS) and _MORSE_SIGNS.search(text) is not None:
        folded = Folded(folded.text.translate(_MORSE_SYMBOLS), folded.source, folded.even)
    if folded.ascii.count(b"-") < 8 or b".-" not in folded.ascii:  # ".-" is "a", "r", "l", "w", "p", "j"
        return []
    text = folded.text
    if text.count(".") + text.count("-") < 16:
        return []
    found: list[View] = []
    for match in _MORSE.finditer(text):
        words = [word.split() for word in _MORSE_WORD.split(match.group().strip())]
        letters = [_MORSE_CODE.get(code, "?") for word in words for code in word]
        if len(letters) < 8 or letters.count("?") > len(letters) // 10:
            continue
        decoded = " ".join("".join(_MORSE_CODE.get(code, "?") for code in word) for word in words)
        view = View("morse", fold(decoded[:MAX_DECODED]), *folded.span(*match.span()))
        found.append(view)
        if len(found) >= MAX_VIEWS:
            break
    return found


def _spaced(folded: Folded) -> list[View]:
    if len(folded.words & _SINGLES) < _MIN_SINGLES:  # spaced letters are one-letter words; prose has a few ("a", "i")
        return []
    marks = folded.ascii.translate(_SPACED_VIEW)
    if marks.find(b" a a ") == -1 and not marks.startswith(b"a a "):  # rare in prose, quick to refute
        return []
    marks = b" " + marks  # offsets shifted by one: `find` sees a leading separator
    at = marks.find(_SPACED_HINT)
    found: list[View] = []
    while at != -1 and len(found) < MAX_VIEWS:
        match = next((m for m in _SPACED.finditer(folded.text, max(0, at - 64)) if m.end() > at), None)
        if match is None:
            break
        run = match.group()
        joiner = max(" .-_*|/,~+", key=run.count)  # the separator between letters; others stay (`user's`, `rules:`)
        words = [word.replace(joiner, "") for word in _SPACED_GAP.split(run)]
        joined = fold(" ".join(w for w in words if w)[:MAX_DECODED])
        found.append(View("spaced", joined, *folded.span(*match.span())))
        at = marks.find(_SPACED_HINT, match.end())
    return found


def _hidden(folded: Folded) -> list[View | Decoding]:
    """Text in invisible carriers. Every carrier is a run of three or more non-ASCII characters, so the
    carrier patterns run only on such runs (found on the ASCII-replaced bytes), never across a whole
    text whose accents come one by one."""
    source = folded.source
    if source.isascii():
        return []
    astral = len(source.encode("utf-16-le", "surrogatepass")) > 2 * len(source)
    if not astral and folded.even:  # nothing beyond the BMP, nothing dropped: no tag, bit or selector
        return []
    carriers = [pattern for pattern, wanted in ((_TAGS, astral), (_BINARY_CARRIER, not folded.even)) if wanted]
    carriers.append(_SELECTORS)  # beyond the BMP, or dropped within it
    runs = [run.span() for run in _NON_ASCII_RUN.finditer(source.encode("ascii", "replace"))]
    found: list[View | Decoding] = []
    for start, end in runs:
        for pattern in carriers:
            for match in pattern.finditer(source, start, end):
                view = _carried(pattern, source, match)
                if view is not None:
                    found.append(view)
    return found[:MAX_VIEWS]


def _carried(pattern: re.Pattern[str], source: str, match: re.Match[str]) -> View | Decoding | None:
    if pattern is _TAGS:
        if match.start() > 0 and source[match.start() - 1] == _FLAG:
            return None  # a regional flag (England, Scotland, Wales): the tags spell its region code
        text = "".join(chr(ord(c) - 0xE0000) for c in match.group())
        return View("hidden", fold(text[:MAX_DECODED]), *match.span())
    if pattern is _BINARY_CARRIER:
        return _binary(match.group(), *match.span())
    raw = bytes(ord(c) - 0xFE00 if ord(c) < 0x10000 else ord(c) - 0xE0100 + 16 for c in match.group())
    return _decoded("hidden", raw, *match.span())


def _binary(run: str, start: int, end: int) -> Decoding | None:
    """Two alternating invisible characters as bits, eight to a byte, either one being the zero."""
    symbols = sorted(set(run))
    if len(symbols) != 2 or len(run) < 16:
        return None
    for zero in symbols:
        bits = "".join("0" if c == zero else "1" for c in run[: len(run) - len(run) % 8])
        raw = int(bits, 2).to_bytes(len(bits) // 8, "big")
        view = _decoded("hidden", raw, start, end)
        if view is not None and readable(view.text):
            return view
    return None


_DEFAULT = Decoder()


def views(folded: Folded) -> list[View]:
    """The views of a text with the built-in common words only (see `Decoder`)."""
    return _DEFAULT.views(folded)
