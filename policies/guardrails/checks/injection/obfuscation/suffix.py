"""Adversarial suffixes: optimised gibberish after a request (greedy coordinate gradient search and its
kin append tokens chosen for their effect on the model, not for sense). Found by the statistics of
the text's tail, never by its strings:

- the tail of the last line is *noise*: of its last whitespace-separated tokens (at least
  `MIN_TOKENS`, or `MIN_CHARS` characters of noise), a share (`MIN_NOISE`) are not words (not
  letters with at most an apostrophe or hyphen inside and punctuation at their edges, nor with a
  case change inside);
- its brackets and quotes do not pair (`MIN_BROKEN`): a search over tokens opens and closes them at
  random, while code, markup, regular expressions, LaTeX, logs and data nest theirs;
- and it mixes classes the way token salad does: words glued to symbols or to other words with a
  case change inside (``similarlyNow``, ``format]{``), or characters switching class at almost
  every step (random printable runs).

A text costs a byte translation and a count of its tail's brackets and quotes when it has too few
to break (every ordinary prompt): the token statistics run only past that.
"""

from __future__ import annotations

import re

WEIGHT = 0.7  # the tail itself is the attack, whatever the request before it
TAIL_CHARS = 480  # the window read: suffixes are a few dozen tokens
MAX_TOKENS = 64
MIN_TOKENS = 6
MIN_CHARS = 24  # ... or this many characters of noise (random runs have few spaces)
MIN_NOISE = 0.4
MIN_BROKEN = 2  # brackets and quotes left unpaired, with one glued word
MIN_GLUED = 3  # glued words, with one unpaired bracket or quote
MIN_SWITCHING = 0.4  # class changes per character, for a random run
_PAIRS = {")": "(", "]": "[", "}": "{"}
_TOKEN = re.compile(r"\S+")
_BRACKET = re.compile(r"[()\[\]{}]")
_CLASS_RUN = re.compile(r"[a-z]+|[A-Z]+|[0-9]+|[^a-zA-Z0-9\s]+")
_BRACKETS = b'()[]{}"`'
_WORD = re.compile(r"""["'(\[\u00ab\u201c\u2018]*[^\W\d_]+(?:['\u2019\-][^\W\d_]+)*[.,;:!?)\]"'\u00bb\u201d\u2019]*""")
_SYMBOLS = frozenset("\\{}[]<>|^~`@#$%&*=+_")
_LETTERS3 = re.compile(r"[^\W\d_]{3,}")
_CASE_TURN = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")
_TITLE = re.compile(r"[A-Z][a-z]+")  # a capital inside a sentence: a name, or a token searched for its effect
_LETTER_RUNS = re.compile(r"[^\W\d_]+")


def gibberish_tail(source: str) -> tuple[int, int] | None:
    """The span of an optimised-looking suffix at the end of `source`, if there is one."""
    end = len(source.rstrip())
    offset = max(0, end - TAIL_CHARS, source.rfind("\n", 0, end) + 1)  # the last line: a suffix is one
    window = source[offset:end]
    raw = window.encode("ascii", "replace")
    if len(raw) - len(raw.translate(None, _BRACKETS)) < 1:
        return None  # not a bracket or quote mark to leave unpaired
    spans = [match.span() for match in _TOKEN.finditer(window)][-MAX_TOKENS:]
    tokens = [window[start:end] for start, end in spans]
    first = _noisy_tail(tokens)
    if first is None:
        return None
    tail = tokens[first:]
    if not (_token_salad(tail) or _random_run(tail)):
        return None
    return offset + spans[first][0], offset + spans[-1][1]


def _noisy_tail(tokens: list[str]) -> int | None:
    """Where the longest tail that begins with noise and holds a `MIN_NOISE` share of it begins: at
    least `MIN_TOKENS` tokens, or `MIN_CHARS` characters of noise."""
    noisy = [_noise(token) or _capital_inside(tokens, at) for at, token in enumerate(tokens)]
    noise = chars = 0
    best = None
    for count in range(1, len(tokens) + 1):
        at = len(tokens) - count
        if noisy[at]:
            noise += 1
            chars += len(tokens[at])
            if noise >= MIN_NOISE * count and (count >= MIN_TOKENS or chars >= MIN_CHARS):
                best = at  # a tail begins with noise: the words before it are the request
    return best


def _capital_inside(tokens: list[str], at: int) -> bool:
    """A capitalised word inside a sentence: a name, or a token chosen for its effect on a model."""
    return at > 0 and _TITLE.fullmatch(tokens[at]) is not None and not tokens[at - 1].endswith((".", "!", "?", ":"))


def _noise(token: str) -> bool:
    """Not a word: symbols or digits inside it, or a case change no word has (``similarlyNow``, ``HEREment``)."""
    return _WORD.fullmatch(token) is None or _CASE_TURN.search(token) is not None


def _token_salad(tail: list[str]) -> bool:
    """Brackets and quotes that do not pair, next to words glued to symbols or to each other."""
    joined = " ".join(tail)
    unpaired = _unpaired(joined)
    glued = sum(1 for token in tail if _glued(token))
    return (unpaired >= MIN_BROKEN and glued >= 1) or (unpaired >= 1 and glued >= MIN_GLUED)


def _random_run(tail: list[str]) -> bool:
    """Random printable characters: the class changes at almost every step, letters come in short
    runs (no words, no identifiers), and at least one bracket or quote is left unpaired."""
    joined = " ".join(tail)
    letters = _LETTER_RUNS.findall(joined)
    if sum(map(len, letters)) < 8:
        return False
    long_runs = sum(len(run) for run in letters if len(run) >= 4)
    return _switching(joined) >= MIN_SWITCHING and long_runs <= 0.3 * sum(map(len, letters)) and _unpaired(joined) >= 1


def _unpaired(text: str) -> int:
    """Brackets that close nothing or stay open, and quote marks left odd."""
    stack: list[str] = []
    broken = 0
    for char in _BRACKET.findall(text):
        if char in "([{":
            stack.append(char)
        elif stack and stack[-1] == _PAIRS[char]:
            stack.pop()
        else:
            broken += 1
    return broken + len(stack) + text.count('"') % 2 + text.count("`") % 2


def _glued(token: str) -> bool:
    """A word glued to a symbol (``format]{``), or words with a case change inside (``similarlyNow``)."""
    if _LETTERS3.search(token) is None:
        return False
    return not _SYMBOLS.isdisjoint(token) or _CASE_TURN.search(token) is not None


def _switching(text: str) -> float:
    """Changes of character class (lower, upper, digit, other) per character, spaces skipped."""
    runs = _CLASS_RUN.findall(text)
    chars = sum(map(len, runs))
    return (len(runs) - 1) / (chars - 1) if chars > 1 else 0.0
