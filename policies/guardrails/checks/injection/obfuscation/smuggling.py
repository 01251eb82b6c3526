"""Smuggled payloads: a sentence cut into pieces that the prompt asks the model to put back together,
so that no piece reads as what it is. Reassembled by rules, not by wording:

- ``reassembled``: three or more short string literals assigned to names (``a = "ign"``, ``let p2 =
  'ore'``, ``x is "…"``), joined in the order an expression names them (``a + b + c``,
  ``concat(a, b)``, ``{a}{b}``) or else in the order given, and at least one join falls inside a word
  (a piece ends in a letter and the next begins with one); or a list of six or more quoted pieces
  (``['h', 'o', 'w', …]``). Kept by `decoded` only when the joined text reads as text;
- ``split_words``: words broken by separators (``ig-no-re``, ``pre|vi|ous``) or by spaces (``gi ve
  me d et ailed``), put back together (weighed only when that reveals something), and words broken
  by invisible code points between letters (a carrier: folding reads them whole, and nobody types
  them).
"""

from __future__ import annotations

import re
from itertools import islice, pairwise

from policies.guardrails.checks.injection.obfuscation.codes import MAX_CHARS, Decoding
from policies.guardrails.normalize import Folded

MIN_PIECES = 3
MIN_LISTED = 6
MAX_PIECE = 24  # characters: longer literals are strings of a program, not pieces of one sentence
MAX_ASSIGNMENTS = 256
MAX_QUOTES = 256
_QUOTES = "\"'`\u2018\u2019\u201c\u201d\u00ab\u00bb"
_NAMED = re.compile(  # what precedes a piece: a short name and an assignment, ending where its quote opens
    r"\b([a-z_][a-z0-9_]{0,15})\s*(?:=|:=|:|->|\bis|\bbe|\bequals?|\bholds?|\best|\bist|\bes|\be|\bsia)\s*$"
)
_PIECE = re.compile(  # a piece: a short quoted literal, then the end of its statement or the next name
    rf"[{_QUOTES}]([^\n]{{1,{MAX_PIECE}}}?)[{_QUOTES}]"
    r"(?=\s*(?:[,;.\n)]|$|\s(?:and|und|et|y|e)\b|\s[a-z_][a-z0-9_]{0,15}\s*(?:=|:|is\b)))"
)
_ITEM = rf"[{_QUOTES}]([^\n{_QUOTES}]{{1,8}})[{_QUOTES}]"
_LISTED = re.compile(rf"{_ITEM}(?:\s*,\s*{_ITEM}){{{MIN_LISTED - 1},}}")
_ASSIGN_VIEW = bytes(61 if chr(i) in "=:" else 113 if chr(i) in "\"'`" else i for i in range(128)) + b"?" * 128
_ASSIGNING_WORDS = (b" is", b" be", b" equals", b" equal", b" holds", b" est", b" ist", b" es", b" e", b" sia", b">")
_LIST_ITEM = re.compile(_ITEM)
_SEPARATED_VIEW = bytes(97 if chr(i).isalpha() else 45 if chr(i) in "-|*" else 32 for i in range(128)) + b" " * 128
_SEPARATED = re.compile(r"([a-z])[-|*](?=[a-z])")
_LETTERS_AND_SEPARATORS = bytes(i if chr(i).isalnum() or i == 95 else 32 for i in range(128)) + b" " * 128  # as words
_INVISIBLE_INSIDE = re.compile("[a-zA-Z][\u00ad\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff]+[a-zA-Z]")
MIN_BROKEN = 4  # words broken by separators; prose has a few (e.g., well-known, example.com)
# One- and two-letter words, less those the checks' languages write: pieces of cut words.
_SHORT_WORDS = frozenset(
    b"a i o e y u an as at be by do go he if in is it me my no of on or so to up us we ok oh am "
    b"la le de du en et un il je tu ce ne se ma ta sa on au ou es el lo mi te su al da di ci ti se er es "
    b"du ja zu im am um ob wo da so eh ei em eu os as na no um ao ik je jij ze we op te na od ze do".split()
)
_LOWER = "abcdefghijklmnopqrstuvwxyz"
ODD_SHORT = frozenset(c.encode() for c in _LOWER) | frozenset((a + b).encode() for a in _LOWER for b in _LOWER)
ODD_SHORT -= _SHORT_WORDS
MIN_ODD_SHORT = 4
_FRAGMENT_RUN = re.compile(r"(?:[^\W\d_]{1,12}[ \t]+){7,}[^\W\d_]{1,12}")
MIN_SHORT = 0.5  # share of fragments (one to three letters) in a run of words cut by spaces


def reassembled(folded: Folded) -> list[Decoding]:
    text = folded.text
    found: list[Decoding] = []
    view = folded.ascii
    if view.find(b"'") == -1 and view.find(b'"') == -1 and view.find(b"`") == -1 and folded.even:
        return found  # no quote mark (typographic ones are not ASCII: the text would not be even)
    marks = view.translate(_ASSIGN_VIEW)
    if marks.count(b"=q") + marks.count(b"= q") + marks.count(b" is q") + marks.count(b" be q") >= MIN_PIECES:
        found += _assigned(folded, marks)
    if marks.count(b"q,") + marks.count(b"q, ") >= MIN_LISTED - 1:
        for match in islice(_LISTED.finditer(text), 4):
            pieces = _LIST_ITEM.findall(match.group())
            found.append(Decoding("reassembled", "".join(pieces)[:MAX_CHARS], *folded.span(*match.span())))
    return found


def _assigned(folded: Folded, marks: bytes) -> list[Decoding]:
    """Quoted pieces assigned to names, found from the quotes that follow an assignment."""
    text = folded.text
    values: dict[str, str] = {}
    first = last = -1
    at = marks.find(b"q")
    for _ in range(MAX_QUOTES):  # quote marks looked at, at most: bounded on hostile text
        if at == -1 or len(values) >= MAX_ASSIGNMENTS:
            break
        before = marks[max(0, at - 12) : at].rstrip()
        assigned = before.endswith(b"=") or before.endswith(_ASSIGNING_WORDS)
        named = _NAMED.search(text, max(0, at - 32), at) if assigned else None
        piece = _PIECE.match(text, at) if named is not None else None
        if named is None or piece is None:
            at = marks.find(b"q", at + 1)
            continue
        values.setdefault(named.group(1), piece.group(1))
        first = named.start() if first == -1 else first
        last = piece.end()
        at = marks.find(b"q", piece.end())
    if len(values) < MIN_PIECES:
        return []
    order, end = _joined(text, values, last)
    pieces = [values[name] for name in order]
    if not any(a[-1:].isalpha() and b[:1].isalpha() for a, b in pairwise(pieces)):
        return []  # every join falls between words: strings of a program, not a word cut in pieces
    return [Decoding("reassembled", "".join(pieces)[:MAX_CHARS], *folded.span(first, max(end, last)))]


def _joined(text: str, values: dict[str, str], after: int) -> tuple[list[str], int]:
    """The names in the order the last joining expression lists them (``a + b``, ``concat(a, b)``,
    ``{a}{b}``), or in the order they were assigned when no expression names three of them."""
    names = "|".join(re.escape(name) for name in sorted(values, key=len, reverse=True))
    expression = re.compile(rf"\b(?:{names})\b(?:\W{{1,4}}\b(?:{names})\b){{{MIN_PIECES - 1},}}")
    found = None
    for match in expression.finditer(text, after):
        found = match
    if found is None:
        return list(values), after
    listed = re.findall(rf"\b(?:{names})\b", found.group())
    return listed, found.end()


class WordSplits:
    """``split_words``: separators between letters removed (``ig-no-re`` to ``ignore``) in a text with
    at least `MIN_BROKEN` words broken so, kept when that makes a word the checks know; words cut by
    spaces (`_fragments`); and invisible code points inside words (``invisible_split``)."""

    def __init__(self, known: frozenset[str]) -> None:
        self._known = frozenset(word.encode() for word in known)

    def find(self, folded: Folded) -> list[Decoding]:
        found: list[Decoding] = []
        marks = folded.ascii.translate(_SEPARATED_VIEW)
        if marks.count(b"a-a") >= MIN_BROKEN:
            joined = frozenset(folded.ascii.translate(_LETTERS_AND_SEPARATORS, b"-|*").split())
            if not (joined - folded.words).isdisjoint(self._known):  # joining made a word the checks know
                text = _SEPARATED.sub(r"\1", folded.text[:MAX_CHARS])
                found.append(Decoding("split_words", text, 0, len(folded.source), whole=True))
        found += _fragments(folded)
        if not folded.even:
            inside = [m.span() for m in islice(_INVISIBLE_INSIDE.finditer(folded.source), 64)]
            if len(inside) >= MIN_BROKEN - 1:
                start, end = inside[0][0], inside[-1][1]
                found.append(Decoding("invisible_split", folded.text, start, end))
        return found


def _fragments(folded: Folded) -> list[Decoding]:
    """Words cut by spaces (``gi ve me d et ailed``): a run of eight or more words of which at least
    `MIN_SHORT` are one to three letters, with its spaces removed (``split_words``; the checks then
    read it for a request). Only in a text with `MIN_ODD_SHORT` one- or two-letter words that no
    language of the checks writes."""
    odd = len(folded.words & ODD_SHORT)
    if odd < MIN_ODD_SHORT or odd < 0.15 * len(folded.words):  # pieces are many of a cut text's words
        return []
    text = folded.text
    found: list[Decoding] = []
    for match in islice(_FRAGMENT_RUN.finditer(text), 4):
        words = match.group().split()
        if sum(len(word) <= 3 for word in words) >= MIN_SHORT * len(words):
            found.append(Decoding("split_words", "".join(words)[:MAX_CHARS], *folded.span(*match.span())))
    return found
