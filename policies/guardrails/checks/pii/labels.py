"""Numbers that the words before them name as an identifier of something other than a phone, or as a
postal code: the `pii` check's reading of labels, applied to a phone candidate when no word near it
says phone (``call``, ``tel``, ``mobile``: `context`), whatever its shape.

- **Labelled identifiers**: a word that names a number (``number``, ``no.``, ``nr``, ``#``, ``ID``,
  ``tag``, ``numéro``, ``Nummer``) with a word of its own beside it says which number: ``customer
  number``, ``asset tag``, ``membership no.``, ``numéro client``, ``número de socio``,
  ``Inventarnummer``. Unless that word says phone, the number is that thing's identifier. A possessive
  or a determiner (``Dana's number``, ``my number``, ``the number``) names no other thing: the number
  stays a candidate, as ``number`` alone leaves it.
- **Registers**: an acronym in capitals of any cased script right before the number (``SIREN``,
  ``ИНН``, ``ΑΦΜ``), in Cyrillic and Greek also with the lower-case words that say whose
  (``ИНН организации``).
- **Names**: two or three capitalised words that open a line or a clause, none of them a word
  `context` reads, right before the number (``Lars Nielsen 39 14 28 60``): a contact's phone, read in
  more regions' formats than the policy's (`national.NAMED_REGIONS`).
- **Postal codes**: a number laid out as a region writes its postal codes (``01310-100`` in Brazil,
  ``62704-1833`` in the US, ``100-0005`` in Japan, ``1100-053`` in Portugal) with a word for postal
  code before it (``CEP``, ``ZIP``, ``PLZ``, ``CP``, ``〒``) or the region's state just before it
  (``Springfield, IL 62704-1833``; ``São Paulo - SP, 01426-001``).
"""

from __future__ import annotations

import re

from policies.guardrails.checks.pii.context import read
from policies.guardrails.normalize import Folded


def _words(spaced: str) -> frozenset[str]:
    return frozenset(spaced.split())


# Words that name a number (folded: "n°" reads "n", "nº" reads "no"); those of languages that write
# what is numbered after them ("numéro client", "número de socio", "numer klienta").
_NAMING = _words(
    "number numbers num nr no nro n # id ids tag tags nummer numer numero numeros numar "
    "cislo broj numeris numurs stevilka nomor nombor numara numarasi szam szama nummeret numret "
    "label labels sticker stickers etikett etiquette etiqueta etichetta"  # "the chair label says ..."
)
_NAMING_FIRST = _words("numero numeros nro n no nr numer numar cislo broj stevilka nomor nombor")
# Words that stand beside a naming word and name no other thing: determiners, possessives, copulas,
# the linking prepositions of "numéro de …", and words for a phone number's role ("direct", "main").
_POSSESSIVE = _words(
    "my your his her its our their s "  # English; "s" is what "Dana's" leaves
    "mein meine meinen meiner dein deine sein seine ihr ihre ihren unser unsere euer eure "
    "mon ma mes ton ta tes son sa ses notre nos votre vos leur leurs "
    "mi mis tu tus su sus nuestro nuestra vuestro "
    "mio mia miei mie tuo tua suo sua nostro nostra vostro vostra loro "
    "meu minha meus minhas teu tua seu sua nosso nossa "
    "mijn jouw je zijn haar ons onze uw hun "
    "moj moja moje twoj twoja jego jej nasz nasza "
    "min mitt mina din ditt dina hans hennes vores vaar var "
    "mera meri mere apna apni aapka aapki tumhara"  # Hindi, as written in Latin letters
)
_TRANSPARENT = _POSSESSIVE | _words(
    "a an the this that these those is are was be of for at on to same full correct right wrong old new "
    "current other another second alternate alternative alt backup direct main private preferred best "
    "daytime evening emergency service services "
    "de di d do da del du des dos das van von der die den dem le la les el il lo gli los l un une uno una "
    "ce cet cette ces este esta ese esa questo questa quel quella dieser diese dieses deze dit dat ten ta "
    "neue neuer neues alte nouveau nouvel nouvelle nuevo nueva nuovo nuova novo nova nieuwe nowy nowa"
)
OWNERS = _POSSESSIVE | _NAMING | _words("moj meu мой моя мій моя мой")  # a label that owns its number or only names one
_LABEL_REACH = 4  # words read back from the number for a label ("customer service number is")
_COMPOUND_ENDS = ("nummer", "nr", "numer", "numero", "szam")  # Kundennummer, asiakasnumero, rendelésszám


def labelled(words: list[str], says_phone: bool) -> bool:
    """Do `words` (`context.words_before` a number) end in a label naming it some other thing's
    identifier? `says_phone`: a word among them says phone (then no label rules it out). A label
    owned by someone (``my Dubai number``, ``Mera number``) names that person's number."""
    if says_phone:
        return False
    tail = words[-_LABEL_REACH:]
    named = ""  # a word between the naming word and the number ("numéro client")
    for at in range(len(tail) - 1, -1, -1):
        word = tail[at]
        if word in _NAMING:
            before = tail[at - 1] if at else ""
            if named and word in _NAMING_FIRST:
                return True
            return _names_a_thing(before) and (at < 2 or tail[at - 2] not in _POSSESSIVE)
        if word.endswith(_COMPOUND_ENDS) and len(word) > 6:  # Kundennummer, Inventarnr (a phone's: says_phone)
            return True
        if word in _TRANSPARENT:
            continue
        if named:
            return False  # two words that name things: a sentence, not a label
        named = word
    return False


def _names_a_thing(word: str) -> bool:
    return bool(word) and word not in _TRANSPARENT and word not in _NAMING and word not in _POSSESSIVE


# --- registers named by their acronym -------------------------------------------------------------
_ACRONYM = re.compile(r"(?<![\w&.-])([^\W\d_]{3,6}):? ?$")  # on the folded text: "siren ", "duns: ", "инн "
# An acronym of a script with cases other than Latin, then the words that say whose register it is,
# in lower case: "ИНН организации 7736…", "ОГРН юридического лица 1027…".
_QUALIFIED = re.compile(r"(?<![\w&.-])([^\W\d_]{3,6})((?: [^\W\d_]+){1,2}):? ?$")
_NANP = re.compile(r"\(?[2-9]\d\d\)?[ .-]?\d{3}[ .-]\d{4}")  # "NYC 212-555-0199": a city's, not a register's
_ACRONYM_REACH = 9
_QUALIFIED_REACH = 40


def acronym_before(folded: Folded, start: int) -> bool:
    """Is the number at `start` right after an acronym written in capitals (``SIREN 732 829 320``,
    ``DUNS 08-146-6849``, ``Partita IVA 0743 …``, ``ИНН 7707…``, ``ΑΦΜ 0940…``)? Registers and
    identifier schemes are named so; people and places are not, and a phone's own acronyms (``TEL``,
    ``GSM``, ``SMS``, ``ТЕЛ``) say phone before this is asked. In Cyrillic and Greek the words that
    qualify the register may stand between (``ИНН организации``)."""
    text = folded.text
    if not text[max(0, start - 3) : start].rstrip(" :")[-1:].isalpha():
        return False  # no word ends right before the number
    if _NANP.match(text, start):
        return False
    match = _ACRONYM.search(text, max(0, start - _ACRONYM_REACH), start)
    if match is not None and _capitals(folded, *match.span(1)):
        return True
    match = _QUALIFIED.search(text, max(0, start - _QUALIFIED_REACH), start)
    if match is None or not _capitals(folded, *match.span(1)):
        return False
    acronym = folded.source[slice(*folded.span(*match.span(1)))]
    qualifier = folded.source[slice(*folded.span(*match.span(2)))]
    return not acronym.isascii() and qualifier.islower()


def _capitals(folded: Folded, start: int, end: int) -> bool:
    word = folded.source[slice(*folded.span(start, end))]
    return word.isalpha() and word.isupper()


# --- a person's name before a number ----------------------------------------------------------------
# Two or three capitalised words that end a line, a list item or a clause, just before the number
# ("Lars Nielsen 39 14 28 60", "Kontakt: Ola Nordmann, 22 …", "Wei Ling 8312 …").
_NAME = re.compile(r"(?:^|(?<=[\n(;,:·|•]))[ \t]*((?:[^\W\d_]{2,} ){1,2}[^\W\d_]{2,}),?\s$")
_NAME_REACH = 60


def name_before(folded: Folded, start: int) -> bool:
    """Does a person's name stand right before the number at `start`: capitalised words (``Lars
    Nielsen``), none of them a word `context` reads (``Meeting ID``, ``Order Total``), opening a line or
    following a colon, a comma or a bracket?"""
    end = folded.span(start, start)[0]
    match = _NAME.search(folded.source, max(0, end - _NAME_REACH), end)
    if match is None:
        return False
    words = match.group(1).split()
    if not all(word[0].isupper() and word[1:].islower() for word in words):
        return False
    return not any(read(word.lower()) for word in words)


# --- postal codes -----------------------------------------------------------------------------------
# Layouts of postal codes long enough to be read as phones (seven digits or more), by region, and
# the words or state codes that say a number so laid out is one.
_POSTAL_LAYOUTS = re.compile(
    r"\d{5}-\d{3}"  # Brazil (CEP)
    r"|\d{2}\.\d{3}-\d{3}"  # Brazil, the older dotted form
    r"|\d{5}-\d{4}"  # United States (ZIP+4)
    r"|\d{3}-\d{4}"  # Japan (〒)
    r"|\d{4}-\d{3}"  # Portugal
    r"|\d{5}-\d{5}"  # Iran
    r"|\d{7,9}"  # unseparated: Brazil, the US (ZIP+4), Japan, Israel, Chile
)
_STATE_LAYOUTS = re.compile(r"\d{5}-\d{3,4}|\d{2}\.\d{3}-\d{3}|\d{8,9}")  # the US's and Brazil's
_POSTAL_WORDS = _words(
    "zip zipcode postcode postal post postleitzahl plz cep cp cap pin pincode codigo code postale "
    "kod pocztowy postnummer postnr postinumero irsz psc tk"
)
# States whose two-letter codes stand before a postal code in addresses: the US and Brazil.
_STATES = _words(
    "al ak az ar ca co ct de dc fl ga hi id il in ia ks ky la me md ma mi mn ms mo mt ne nv nh nj nm ny nc "
    "nd oh ok or pa ri sc sd tn tx ut vt va wa wv wi wy pr "
    "ac ap am ba ce df es go mg mt ms pb pr pe pi rj rn rs ro rr sc sp se to"
)
_POSTAL_MARK = "〒"


def postal(text: str, start: int, end: int, words: list[str]) -> bool:
    """Is the number at ``text[start:end]`` (folded) laid out as a postal code, with a postal word in
    the last words before it or a state code (a word of its own, just before)?"""
    if _POSTAL_LAYOUTS.fullmatch(text, start, end) is None:
        return False
    if _POSTAL_MARK in text[max(0, start - 3) : start]:
        return True
    if any(word in _POSTAL_WORDS for word in words[-3:]):
        return True
    if not words or words[-1] not in _STATES or _STATE_LAYOUTS.fullmatch(text, start, end) is None:
        return False
    return text[max(0, start - 5) : start].rstrip(" ,-\u2013").endswith(words[-1])  # the state, then the code
