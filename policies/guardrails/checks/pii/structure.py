"""How a number is introduced, read from the layout around it rather than from lists of words: the
`pii` check's round-4 rules (issue 35).

- **Label forms**: a word or a short phrase of any script that opens a line, a cell or a clause and
  is followed by a separator (``:``, a full-width colon, ``=``, ``→``, ``#``, ``№``, ``no.``, ``nr.``, ``n°``,
  ``č.``, ``br.``, a tab) or that is a JSON or YAML key (``"waybill": "…"``). Whatever
  the label says, it names what the number is: a phone only where a word says phone (the caller
  asks `context`), the number carries an international prefix, or the label is a person's name. A
  phrase alone before the number with no separator (``Seat block 01729 022990``) is not read so: at the
  start of a line it is as often a sentence (``Txt me 029 …``, ``Bitte unter 0158/…``) or a place
  (``Portland shop 503-…``), which cost the tuning sets up to 0.07 of their phones when tried. So
  no list of the things that carry numbers (consignments, batches, policies, …) is needed: a label
  nobody listed names its number as well as a listed one.
- **Integer limits**: a power of two, or one less (``2147483647``, ``4294967295``, ``65535``), with
  nine digits or more, is a sentinel or a size, not a phone.
- **Creditor references** (ISO 11649): ``RF`` and two check digits open a payment reference, never an
  IBAN (no country has the code RF).
"""

from __future__ import annotations

import re

# On the folded text (lower-case), ending where the number starts. The label: one to four words of
# any script (letters, with inner dots, dashes, apostrophes, slashes or ampersands), opening a line, a
# table cell, a list item or a clause.
_OPEN = r"(?:^|(?<=[\n|;,(\[{•·]))[ \t\"'*>-]*"
_WORD = r"[^\W\d_](?:[^\W_]|[.'\u2019/&-](?=[^\W\d_]))*\.?"
_LABEL = rf"{_WORD}(?:[ ]{_WORD}){{0,3}}"
_SEPARATOR = (
    r"(?:[ \t]*[:\uff1a=→#№][ \t]*(?:#[ \t]*)?"  # "Label: ", "Label = ", "Label → ", "Label #", "Label № "
    r"|[ ]+(?:no|nr|n|nro|nº|n°|c|br|sz|ar|nos)\.?[ \t]*:?[ \t]*#?"  # "Label no. ", "Label nº ", "č.", "br."
    r"|\t+)"  # "Label<TAB>"
)
_LABEL_FORM = re.compile(rf"{_OPEN}(?P<label>{_LABEL}){_SEPARATOR}[\"']?$")
_KEY_FORM = re.compile(r"[\"'](?P<label>[^\W\d](?:[^\W]|[ -])*)[\"'][ \t]*:[ \t]*[\"']?$")  # JSON, YAML keys
_REACH = 60
_LETTERS = re.compile(r"[^\W\d_]+")


def label_before(text: str, start: int) -> tuple[int, int, bool] | None:
    """Where the label introducing the number at `start` of the folded `text` lies (its start and end
    in `text`) and whether a colon alone follows it (``Hamburg: …``, the form a place's or a person's
    name takes too), or None where none does: a word or a short phrase and a separator, or a key.
    Sentences are not labels: "call me on 0612…" has no separator after its words."""
    base = max(0, start - _REACH)
    window = text[base:start]
    match = _LABEL_FORM.search(window)
    if match is not None:
        colon = window[match.end("label") :].strip(" \t\"'") in (":", "\uff1a")
        return base + match.start("label"), base + match.end("label"), colon
    match = _KEY_FORM.search(window)
    if match is not None:
        return base + match.start("label"), base + match.end("label"), False
    return None


def label_form(text: str, start: int) -> bool:
    """Is the number at `start` introduced by a label with a separator, or a key?"""
    return label_before(text, start) is not None


def words_of(label: str) -> list[str]:
    return _LETTERS.findall(label)


def integer_limit(digits: str) -> bool:
    """``2147483647``, ``4294967296``: a power of two or one less, of nine digits or more."""
    if len(digits) < 9 or digits[0] == "0":
        return False
    value = int(digits)
    return value & (value - 1) == 0 or value & (value + 1) == 0


def creditor_reference(text: str, at: int) -> bool:
    """An ISO 11649 reference (``RF18 5390 0754 7034``) opens at `at` of the folded text."""
    return text[at : at + 2] == "rf"
