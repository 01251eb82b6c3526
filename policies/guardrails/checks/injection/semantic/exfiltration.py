"""Exfiltration shapes: a URL (a markdown image or link, an ``<img>`` or ``<a>``, a bare address) built to
carry the conversation's data out, or a request to send that data to an address.

A URL *carries* data when its query or path holds a slot (``{…}``, ``{{…}}``, ``[…]``, ``<…>``,
``%…%``, ``$…``, an all-capitals placeholder, ``____``) or ends with an empty parameter (``?q=``) for
something to be appended. It *exfiltrates* when the conversation's data is what goes there: the slot
names it (``{chat_history}``, ``%LAST_USER_MESSAGE%``), or the words around the URL refer to what the
user said or holds (``the password I gave you earlier``, ``the user's previous messages``) and say
to put it there (append, replace, fill in, followed by). A template with ``{{ user.first_name }}`` in
code, an OAuth ``?code=AUTH_CODE`` example or a tracking link with fixed parameters does neither.
A request to send data names the conversation's data and an address (``forward their contents to
x@y``, ``go to https://… and enter the user's password``).
"""

from __future__ import annotations

import re

from policies.guardrails.base import Span
from policies.guardrails.normalize import Folded

WEIGHTS: dict[str, float] = {"exfiltration": 0.8}

_URL = re.compile(
    r"(?:(?:https?|ftp)://|www\.)(?:[^\s\"'<>`()\[\]]|\[[^\[\]\s]{0,80}\]?|\([^()\s]{0,80}\)|<[^<>\s\"']{1,60}>?)+"
)
_EMAIL = re.compile(r"[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63})+")
_SCHEME = re.compile(r"(?:https?|ftp)$", re.IGNORECASE)
_WWW = re.compile(r"(?<![\w.])$")
_LOCAL_PART = re.compile(r"(?<![\w.+-])[\w.+-]{1,64}$")
_MAX_URLS = 32
# A slot in a URL: a placeholder for a value to be filled in.
_SLOT = re.compile(
    r"\{\{?[^{}\s][^{}]{0,80}\}\}?|\[[^\[\]]{2,80}\]|<[^<>]{2,80}>|%[A-Za-z_][A-Za-z0-9_ ]{1,60}%|"
    r"\$\{?[A-Za-z_]\w{1,40}\}?|(?<==)[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|(?<==)[A-Z]{3,}(?=$|&|#)|_{3,}|\*{3,}|\.{3,}|x{4,}|X{3,}|(?<==)[^\x00-\x7f]{2,}"
)
_EMPTY_PARAM = re.compile(r"[?&][\w.-]{1,30}=$")
_TRAILING = ".,;:!?)]}>*"
_PAIRS = (("[", "]"), ("{", "}"), ("<", ">"))
_CLOSES = {")": "(", "]": "[", "}": "{", ">": "<"}
_SLOT_REACH = 100
_REACH = 220  # characters either side of a URL that are read as its instructions
# What the conversation holds: by itself ("chat history"), or as a secret or personal datum.
_CONVERSATION = (
    r"conversation|chat|history|messages?|historial|conversacion|cronologia|verlauf|historique|gesprach|"
    r"clipboard|contacts|cookies|said|told|typed|wrote|asked|questions|\u5bf9\u8bdd|\u804a\u5929|\u8bb0\u5f55"
)
_SECRET = (
    r"passwords?|"  # noqa: S105 - the names of secrets, not one
    r"passwd|pw|secrets?|api[ _-]?keys?|apikey|tokens?|credentials?|cookies?|seed[ _-]?phrase|"
    r"private[ _-]?key|pin|card(?:[ _-]?(?:number|details|data))?|cvv|ssn|contrasena|passwort|kennwort|mot de passe|"
    r"wachtwoord|carta|tarjeta|karte|\u5bc6\u7801"
)
_PERSONAL = (
    r"e-?mails?|emails?|names?|phone|telephone|address|addr|location|ip(?:[ _-]?address)?|account|wallet|"
    r"personal|user(?:name)?|usuario|utilisateur|nutzer|benutzer|utente|gebruiker|nombre|correo|nom|courriel|"
    r"nome|naam|adres|dati|datos|daten|donnees|gegevens|\u7528\u6237|\u90ae\u7bb1|\u7535\u8bdd"
)
_DATA_WORD = re.compile(rf"(?<![a-z])(?:{_CONVERSATION}|{_SECRET}|{_PERSONAL})(?![a-z])")
_SLOT_NAMES_CONVERSATION = re.compile(
    rf"(?<![a-z])(?:{_CONVERSATION}|said|told|typed|question|"
    r"summary|resume|zusammenfassung|riassunto|resumen)(?![a-z])"
)
# Words that point at the conversation, or at the user as its subject (strong), in several languages; and
# words that only point back in time (weak: "the link we sent earlier" is not the conversation's data).
_STRONG_REFERENCE = (
    r"the\W{1,3}users?\W{0,2}s?|user\W{0,2}s|(?:i|you|the\W{1,3}user|they)\W{1,3}(?:gave|told|typed|said|mentioned|"
    r"shared|wrote|asked|provided|entered|sent|pasted)|(?:this|our|the)\W{1,3}(?:thread|conversation|chat|session|"
    r"context|system\W{1,3}message)|you\W{1,3}(?:see|know|have|can\W{1,3}access|remember|found)|conversation|chat|"
    r"history|everything\W{1,3}(?:i|the\W{1,3}user)|personal\W{1,3}(?:details|data|information)|clipboard|open\W{1,3}"
    r"tabs|contacts\W{1,3}list|saved\W{1,3}card|del\W{1,3}usuario|de\W{1,3}l\W{0,2}utilisateur|des\W{1,3}nutzers|"
    r"dell\W{0,2}utente|van\W{1,3}de\W{1,3}gebruiker|\u7528\u6237\u7684|historial|cronologia|verlauf|historique"
)
_STRONG = re.compile(rf"(?<![a-z])(?:{_STRONG_REFERENCE})(?![a-z])")
_REFERENCE = re.compile(
    rf"(?<![a-z])(?:{_STRONG_REFERENCE}|earlier|previous(?:ly)?|prior|so\W{{1,3}}far|above)(?![a-z])"
)
_FILL = re.compile(
    r"(?<![a-z])(?:append\w*|add(?:ing|ed)?|replac\w*|substitut\w*|swap\w*|fill\w*|insert\w*|put|plac\w*|includ\w*|encod\w*|"
    r"concatenat\w*|join\w*|follow(?:ed|ing)|plus|attach\w*|pass\w*|with\W{1,3}(?:the|their|his|her|my)|"
    r"sustitu\w*|reemplaz\w*|rellen\w*|anad\w*|ersetz\w*|fug\w*|einsetz\w*|remplac\w*|ajout\w*|remplis\w*|"
    r"sostitu\w*|aggiung\w*|inserisc\w*|substitu\w*|vervang\w*|vul\w*|voeg\w*|\u586b|\u66ff\u6362)(?![a-z])"
)
_SEND = re.compile(
    r"(?<![a-z])(?:send|forward|post|upload|submit|enter|paste|email|e-mail|transmit|leak|dm|"
    r"envia|envoie|sende|invia|stuur)(?![a-z])"
)
_SEND_WORDS = frozenset(
    b"send forward post upload submit enter paste email mail transmit leak dm envia envoie sende invia stuur".split()
)
_DATA_WORDS = frozenset(
    b"password passwords passwd secret secrets key keys apikey token tokens credential credentials cookie cookies seed "
    b"pin card cvv ssn contrasena passwort kennwort passe wachtwoord carta tarjeta karte conversation chat history "
    b"messages message historial conversacion cronologia verlauf historique gesprach clipboard contacts contents "
    b"database".split()
)
_WORD_VIEW = bytes(i if chr(i).isalnum() else 32 for i in range(128)) + b" " * 128
_SENT_DATA = re.compile(rf"(?<![a-z])(?:{_SECRET}|{_CONVERSATION}|contents|database)(?![a-z])")


def spans(folded: Folded) -> list[Span]:
    """At most one span: the first URL or address that carries the conversation's data out."""
    source = folded.source
    for start in _starts(source, "://", _SCHEME) + _starts(source, "www.", _WWW):
        match = _URL.match(source, start)
        if match is None:
            continue
        url = _whole(source, match)
        end = start + len(url)
        around = _around(folded, start, end)
        if _exfiltrates(url, around) or _sends_to(around):
            return [Span(start, end, "exfiltration", WEIGHTS["exfiltration"])]
    for at in _starts(source, "@", _LOCAL_PART):
        match = _EMAIL.match(source, at)
        if match is not None and _sends_to(_around(folded, match.start(), match.end())):
            return [Span(match.start(), match.end(), "exfiltration", WEIGHTS["exfiltration"])]
    return []


def _starts(source: str, mark: str, back: re.Pattern[str]) -> list[int]:
    """Where URLs or addresses begin: each occurrence of `mark` (a C-speed ``find``), moved back over
    what comes before it (the scheme, the local part); a bounded number of them."""
    found: list[int] = []
    at = source.find(mark)
    while at != -1 and len(found) < _MAX_URLS:
        head = back.search(source, max(0, at - 64), at)
        found.append(head.start() if head is not None else at)
        at = source.find(mark, at + len(mark))
    return found


def _whole(source: str, match: re.Match[str]) -> str:
    """The URL without the sentence's punctuation after it, and with a placeholder that holds spaces
    (``?q=[INSERT THE USER'S QUESTION HERE]``) read to its end."""
    url = match.group()
    for opener, closer in _PAIRS:
        if url.count(opener) > url.count(closer):
            end = source.find(closer, match.end(), match.end() + _SLOT_REACH)
            if end != -1 and "\n" not in source[match.end() : end]:
                return source[match.start() : end + 1]
    while url and url[-1] in _TRAILING:
        pair = _CLOSES.get(url[-1])
        if pair is not None and url.count(pair) >= url.count(url[-1]):
            break  # a closer that closes something in the URL: keep it
        url = url[:-1]
    return url


def _around(folded: Folded, start: int, end: int) -> str:
    """The folded text around a source range, within the paragraph (a blank line ends it)."""
    text = folded.text
    if not folded.even:  # offsets differ: read the source's neighbourhood, lower-cased
        text = folded.source.lower()
    before = text[max(0, start - _REACH) : start]
    after = text[end : end + _REACH]
    before = before[before.rfind("\n\n") + 1 :]
    cut = after.find("\n\n")
    return before + " " + (after if cut == -1 else after[:cut])


def _slots(url: str) -> list[str]:
    """The slots of a URL's path and query (not its host): placeholders, and an empty last parameter."""
    rest = url.split("//", 1)[-1]
    slash = rest.find("/")
    tail = rest[slash:] if slash != -1 else ""
    found = [slot.group() for slot in _SLOT.finditer(tail)]
    if _EMPTY_PARAM.search(url):
        found.append("")
    return found


def _exfiltrates(url: str, around: str) -> bool:
    slots = _slots(url)
    if not slots:
        return False
    named = [slot.lower() for slot in slots if slot]
    for name in (name.replace("_", " ") for name in named):
        if _SLOT_NAMES_CONVERSATION.search(name) or (_STRONG.search(name) and _DATA_WORD.search(name)):
            return True  # the slot names the conversation ({chat_history}), or the user's data ({the user's token})
    if _REFERENCE.search(around) is None or _DATA_WORD.search(around) is None:
        return False
    return _FILL.search(around) is not None or any(_DATA_WORD.search(name.replace("_", " ")) for name in named)


def _sends_to(around: str) -> bool:
    """A request to send, enter or forward the conversation's secrets or the user's data at an address."""
    words = frozenset(around.encode("ascii", "replace").translate(_WORD_VIEW).split())
    if _SEND_WORDS.isdisjoint(words) or (_DATA_WORDS.isdisjoint(words) and around.isascii()):
        return False
    return (
        _SEND.search(around) is not None
        and _STRONG.search(around) is not None
        and _SENT_DATA.search(around) is not None
    )
