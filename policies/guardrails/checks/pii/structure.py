"""How a number is introduced, read from the layout around it rather than from lists of words: the
`pii` check's round-4 rules (issue 35).

- **Label forms**: a word or a short phrase of any script that opens a line, a cell or a clause and
  is followed by a separator (``:``, a full-width colon, ``=``, ``→``, ``#``, ``№``, ``no.``, ``nr.``, ``n°``,
  ``č.``, ``br.``, a tab) or that is a JSON or YAML key (``"waybill": "…"``). Whatever
  the label says, it names what the number is: a phone only where a word says phone (the caller
  asks `context`), the number carries an international prefix, or the label is a person's name. So
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
_LABEL_FORM = re.compile(rf"{_OPEN}{_LABEL}{_SEPARATOR}[\"']?$")
_KEY_FORM = re.compile(r"[\"'][^\W\d](?:[^\W]|[ -])*[\"'][ \t]*:[ \t]*[\"']?$")  # JSON, YAML keys
_REACH = 60


def label_form(text: str, start: int) -> bool:
    """Is the number at `start` of the folded `text` introduced by a label (a word or a short phrase and a
    separator, or a key)? Sentences are not labels: "call me on 0612…" has
    no separator after its words."""
    window = text[max(0, start - _REACH) : start]
    return bool(_LABEL_FORM.search(window) or _KEY_FORM.search(window))


def label_words(text: str, start: int) -> list[str] | None:
    """The words of the label form before `start`, or None where there is none."""
    window = text[max(0, start - _REACH) : start]
    match = _LABEL_FORM.search(window)
    if match is None:
        return None if _KEY_FORM.search(window) is None else []
    return re.findall(r"[^\W\d_]+", match.group())


def integer_limit(digits: str) -> bool:
    """``2147483647``, ``4294967296``: a power of two or one less, of nine digits or more."""
    if len(digits) < 9 or digits[0] == "0":
        return False
    value = int(digits)
    return value & (value - 1) == 0 or value & (value + 1) == 0


def creditor_reference(text: str, at: int) -> bool:
    """An ISO 11649 reference (``RF18 5390 0754 7034``) opens at `at` of the folded text."""
    return text[at : at + 2] == "rf"
