"""The request around a carrier: asking for hidden text to be decoded and obeyed is the attack, whatever
the hidden text says. Signals, each found only in a text that holds a carrier (so ordinary prompts
never pay for them):

- ``obey_request``: a verb of obedience in the imperative (``follow``, ``carry out``, ``answer``,
  ``do what``; French, German, Spanish, Italian, Portuguese, Dutch, Polish, Turkish forms) aimed at
  the hidden content (``it``, ``the instruction``, ``what it says``) or closing the request;
- ``encoded_reply``: a request to answer in the carrier's encoding (so that output filters cannot read
  the answer);
- ``decoded_request``: the decoded text is itself a request (``explain how``, ``write``, ``how can
  I``): an encoded question, not encoded data;
- ``nested``: a carrier inside another one.

The words are classes written from what such requests share, in several languages; none is the
wording of a published prompt.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from policies.guardrails.base import Span
from policies.guardrails.checks.injection import structure
from policies.guardrails.checks.injection.obfuscation import suffix
from policies.guardrails.checks.injection.vocab import words_of
from policies.guardrails.normalize import Folded


class View(Protocol):
    """A decoded view (`decoded.View`), as far as the request around it needs it."""

    @property
    def kind(self) -> str: ...
    @property
    def folded(self) -> Folded: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def aligned(self) -> bool: ...
    @property
    def whole(self) -> bool: ...
    @property
    def depth(self) -> int: ...


WEIGHTS: dict[str, float] = {
    "decode_request": 0.3,  # a text holding a carrier asks for decoding
    "encoded_prompt": 0.3,  # ... or is mostly carrier
    "base32": 0.3,  # carriers, like `decoded`'s: decoded into readable text
    "base85": 0.3,
    "binary": 0.3,
    "charcodes": 0.3,
    "percent": 0.3,
    "cipher": 0.3,
    "nato": 0.3,
    "braille": 0.3,
    "piglatin": 0.3,
    "disguised": 0.3,  # letters from other scripts or styled letters, read by folding
    "split_payload": 0.5,  # fragments that join into a sentence (`smuggling`)
    "split_words": 0.3,  # words broken by separators, when joining them revealed something
    "nested": 0.2,
    "obey_request": 0.3,
    "encoded_reply": 0.3,
    "decoded_request": 0.2,
    "gibberish_suffix": suffix.WEIGHT,
}
LABELS = {"reassembled": "split_payload", "invisible_split": "split_words", "reversed_words": "reversed"}

DECODE_WORDS = structure.DECODE_WORDS | words_of(
    "base32 base85 ascii85 ascii octal unicode braille nato phonetic atbash pig latin leetspeak leet percent "
    "urlencoded entities escapes quoted printable plaintext code codes shift ciphertext decrypted deciphered work "
    "figure rebuild reassemble assemble join concatenate combine merge glue piece together "
    "decode decodez decoder dechiffre dechiffrez dechiffrer decrypte traduis traduisez "
    "dekodiere dekodieren entschlussele entschlussle entschlusseln ubersetze "
    "decodifica decodificar descifra descifrar traduce decifra decifrare traduci "
    "decodifique decifre traduza decodeer ontcijfer vertaal odkoduj rozszyfruj przetlumacz coz desifre"
)  # the words of a request to decode, in the languages the checks read
_OBEY = (
    r"(?:follow|obey|execute|carry\W{1,3}out|act\W{1,3}(?:on|upon)|comply\W{1,3}with|perform|fulfil+|complete|"
    r"proceed(?:\W{1,3}with)?|go\W{1,3}ahead(?:\W{1,3}with)?|answer|respond(?:\W{1,3}to)?|reply(?:\W{1,3}to)?|"
    r"process|treat|do|just\W{1,3}do|"
    r"suis|suivez|execute[sz]?|obeis(?:sez)?|repond(?:s|ez)?|fais|faites|applique[sz]?|realise[sz]?|"
    r"befolge|befolgen|fuhre|fuhr|gehorche|antworte|beantworte|tu|tue|mach|erledige|"
    r"sigue|siga|sigan|ejecuta|ejecute|obedece|responde|contesta|haz|cumple|realiza|"
    r"segui|esegui|obbedisci|rispondi|fai|obedeca|responda|faca|cumpra|realize|"
    r"volg|voer|gehoorzaam|antwoord|beantwoord|doe|wykonaj|odpowiedz|zrob|uygula|cevapla|yanitla)"
)
_TARGET = (
    r"(?:it|them|this|that|these|those|its|what|whatever|everything|accordingly|"
    r"ce|cela|ca|ses|es|sie|das|was|dem|der|den|lo|la|las|los|esto|eso|quello|quanto|cio|isso|o|as|os|"
    r"het|wat|dit|to|bunu|"
    r"(?:the|its|any|all|your|le|la|les|die|der|das|el|la|il|lo|a|o|de|het)?\W{0,3}(?:\w{1,15}\W{1,3}){0,2}?"
    r"(?:instructions?|request|question|task|message|command|order|orders|prompt|directive|text|note|content|"
    r"sentence|result|output|string|decoded|hidden|encoded|resulting|inner|inside|within|contained|embedded|"
    r"joined|combined|assembled|printed|printed|anweisung\w*|aufgabe|befehl|nachricht|frage|consignes?|demande|"
    r"tache|ordre|instrucci\w*|peticion|pregunta|tarea|mensaje|orden|istruzion\w*|richiesta|domanda|compito|"
    r"messaggio|instruc\w*|pedido|pergunta|tarefa|mensagem|opdracht|instructie\w*|vraag|bericht|verzoek|"
    r"polecen\w*|talimat\w*))(?!\w)"
)
_IMPERATIVE_BEFORE = re.compile(
    r"(?:^|[.!?:;,(\n\-]|\b(?:and|then|please|just|simply|now|also|directly|et|puis|und|dann|bitte|y|luego|e|poi|"
    r"depois|en|dan|i|ve|to))\W{0,3}$"
)
_OBEY_AT = re.compile(rf"\b{_OBEY}\b(?:\W{{1,3}}(?:\w{{1,15}}\W{{1,3}}){{0,3}}?{_TARGET}|\W{{0,3}}(?:[.!:]|$))")
_OBEY_WORDS = words_of(
    "follow obey execute carry act comply perform fulfil fulfill complete proceed go answer respond reply process "
    "treat do suis suivez executez executes obeis obeissez reponds repondez fais faites applique realise befolge "
    "befolgen fuhre fuhr gehorche antworte beantworte tu tue mach erledige sigue siga sigan ejecuta ejecute obedece "
    "responde contesta haz cumple realiza segui esegui obbedisci rispondi fai obedeca responda faca cumpra realize "
    "volg voer gehoorzaam antwoord beantwoord doe wykonaj odpowiedz zrob uygula cevapla yanitla"
)
_ENCODINGS = (
    r"(?:base\W?64|b64|base\W?32|base\W?85|ascii85|hex\w*|base16|rot\W?13|morse(?:\W{1,3}code)?|binary|braille|"
    r"leet\w*|1337|l33t|caesar|atbash|pig\W{1,3}latin|nato|reversed|backwards|url\W?encod\w*|percent\W?encod\w*|"
    r"code\W{1,3}points|(?:the\W{1,3})?same\W{1,3}(?:encoding|cipher|code|format\W{1,3}as\W{1,3}the\W{1,3}"
    r"(?:question|input|message))|code)"
)
_REPLY = re.compile(
    r"\b(?:answer|answers|respond|reply|write|writing|output|speak|talk|communicate|return|repondez|reponds|"
    r"antworte|responde|rispondi|responda|antwoord)\b[^.!?\n]{0,40}?\b(?:in|using|with|en|auf|em|im)\W{1,3}"
    rf"(?:only\W{{1,3}})?{_ENCODINGS}(?!\w)"
)
_REPLY_WORDS = words_of("answer answers respond reply write writing output speak talk communicate return")
_REPLY_WORDS |= words_of("repondez reponds antworte responde rispondi responda antwoord")
_ASK = (
    r"(?:explain|describe|write|tell|give|list|show|provide|generate|create|compose|draft|teach|make|build|"
    r"design|produce|develop|outline|suggest|find|help|print|output|say|repeat|reveal|ignore|forget|disregard|"
    r"pretend|act\W{1,3}as|you\W{1,3}are\W{1,3}now|from\W{1,3}now\W{1,3}on|send|copy|"
    r"how\W{1,3}(?:do|can|could|would|should|to|does|might|may|much|many)|"
    r"what\W{1,3}(?:is|are|s)\W{1,3}the\W{1,3}(?:best|easiest|fastest|simplest|cheapest|most)|"
    r"which\W{1,3}\w+(?:\W{1,3}\w+)?\W{1,3}(?:can|could|should|do|will|make)|where\W{1,3}(?:can|do)|"
    r"is\W{1,3}there\W{1,3}a\W{1,3}way|can\W{1,3}you|could\W{1,3}you|i\W{1,3}(?:want|need)|"
    r"explique[rz]?|ecris|dis|donne[rz]?|decris|montre[rz]?|cree|genere|redige|raconte|oublie|"
    r"comment\W{1,3}(?:faire|puis|peut|peux|fabriquer|on|contourner|pirater|voler)|"
    r"erklare|erklar|schreib(?:e|en)?|sag|sage|gib|beschreibe|zeig(?:e|en)?|nenne|erstelle|ignoriere|vergiss|"
    r"wie\W{1,3}(?:kann|konnte|mache|macht|baue|bekomme|man|ich|falsche|knacke)|"
    r"explica(?:me|r)?|escrib(?:e|eme|ir)|dime|dame|describe|muestra(?:me)?|crea|genera|olvida|ignora|"
    r"como\W{1,3}(?:puedo|hacer|se|hago|robar|fabricar|podria|posso|faco|fazer|clonar|invadir|roubar)|"
    r"spiega(?:mi)?|scrivi|dimmi|dammi|descrivi|mostra(?:mi)?|dimentica|come\W{1,3}(?:posso|si|fare|faccio|potrei)|"
    r"escreva|diga|descreva|mostre|faca|crie|gere|"
    r"leg\W{1,3}uit|schrijf|vertel|geef|beschrijf|toon|maak|negeer|vergeet|hoe\W{1,3}(?:kan|maak|moet|doe)|"
    r"napisz|wyjasnij|powiedz|podaj|opisz|pokaz|zignoruj|jak\W{1,3}(?:moge|zrobic|ukrasc|zhakowac)|"
    r"quais|qual|quel\w*|welche|cual\w*|quale)"
)
_ASK_WORDS = words_of(
    "explain describe write tell give list show provide generate create compose draft teach make build design "
    "produce develop outline suggest find help print output say repeat reveal ignore forget disregard pretend act "
    "you from send copy how what which where is can could i want need "
    "explique expliquer ecris dis donne donner decris montre montrer cree genere redige raconte oublie comment "
    "erklare erklar schreib schreibe schreiben sag sage gib beschreibe zeig zeige zeigen nenne erstelle ignoriere "
    "vergiss wie explica explicame explicar escribe escribeme escribir dime dame muestra muestrame crea genera "
    "olvida ignora como spiega spiegami scrivi dimmi dammi descrivi mostra mostrami dimentica come escreva diga "
    "descreva mostre faca crie gere leg schrijf vertel geef beschrijf toon maak negeer vergeet hoe napisz wyjasnij "
    "powiedz podaj opisz pokaz zignoruj jak quais qual quel quelle quels quelles welche cual cuales quale"
)  # the first words of the requests below, for a word-set test before the pattern
_REQUEST = re.compile(
    rf"(?:^|[.!?:\n]\W{{0,3}})(?:(?:please|now|also|kindly|so|then|bitte|por\W{{1,3}}favor)\W{{1,3}})?{_ASK}\b"
)
# Words run together (their spaces removed by `smuggling`): a request by the verb it opens with.
_RUN_TOGETHER = re.compile(
    r"(?:please)?(?:explain|describe|write|tell|give|list|show|provide|generate|create|teach|make|build|how(?:do|can|to)|"
    r"ignore|forget|reveal|print|repeat|explique|ecris|donne|comment|erklar|schreib|gib|wie(?:kann|mache)|explica|"
    r"escrib|dime|dame|como|spiega|scrivi|dimmi|come(?:posso|si)|escreva|diga|napisz|vertel|schrijf|geef|hoe)"
)


def obey_request(text: str, words: frozenset[bytes]) -> tuple[int, int] | None:
    """Where the text asks, in the imperative, for hidden content to be followed or answered."""
    if _OBEY_WORDS.isdisjoint(words):
        return None
    for match in _OBEY_AT.finditer(text):
        if _IMPERATIVE_BEFORE.search(text, max(0, match.start() - 24), match.start()) is not None:
            return match.span()
    return None


def encoded_reply(text: str, words: frozenset[bytes]) -> tuple[int, int] | None:
    """Where the text asks for the answer in an encoding."""
    if _REPLY_WORDS.isdisjoint(words):
        return None
    match = _REPLY.search(text)
    return match.span() if match is not None else None


def decode_request(words: frozenset[bytes]) -> bool:
    return not DECODE_WORDS.isdisjoint(words)


def reveals_request(view: Folded, folded: Folded, reordered: bool = False) -> bool:
    """A text read in place (leetspeak, spaced letters, a cipher of the whole text) makes a request the
    text as written does not: it holds a request verb the text lacks (or, `reordered`, the same words
    in another order open a request), a word-set test before any pattern."""
    if " " not in view.text.strip():
        return is_request(view.text)
    if not reordered and (view.words - folded.words).isdisjoint(_ASK_WORDS):
        return False
    return is_request(view.text) and not is_request(folded.text)


def is_request(decoded: str) -> bool:
    """The decoded text, folded, is a request: one of its sentences opens with one (or, its words run
    together, it opens with a request's verb)."""
    if " " not in decoded.strip():
        return len(decoded) >= 16 and _RUN_TOGETHER.match(decoded) is not None
    return _REQUEST.search(decoded) is not None


def around(folded: Folded, carriers: Sequence[View]) -> list[Span]:
    """The signals of the request around a text's carriers (at least one): the request to decode
    (``decode_request``), or else a prompt that is mostly carrier (``encoded_prompt``: the request is
    implied); to obey (``obey_request``) or to answer encoded (``encoded_reply``); a decoded text
    that is a request (``decoded_request``), inside the data of a data task (``inside_data``); a
    carrier in a carrier (``nested``)."""
    first = (carriers[0].start, carriers[0].end)
    found: list[Span] = []
    text, words, source = folded.text, folded.words, folded.source
    located = sum(v.end - v.start for v in carriers if v.depth == 0 and not (v.whole or v.aligned))
    if decode_request(words):
        found.append(Span(*first, "decode_request", WEIGHTS["decode_request"]))
    elif located >= 0.6 * len(source.strip()):
        found.append(Span(*first, "encoded_prompt", WEIGHTS["encoded_prompt"]))
    for name, find in (("obey_request", obey_request), ("encoded_reply", encoded_reply)):
        at = find(text, words)
        if at is not None:
            found.append(Span(*folded.span(*at), name, WEIGHTS[name]))
    request = _decoded_request(folded, carriers)
    if request is not None:
        found.append(Span(request.start, request.end, "decoded_request", WEIGHTS["decoded_request"]))
        begins = structure.data_start(text)
        if begins is not None and request.start >= folded.span(begins, begins)[0] and not request.whole:
            found.append(Span(request.start, request.end, "inside_data", structure.WEIGHTS["inside_data"]))
    nested = next((v for v in carriers if v.depth), None)
    if nested is not None:
        found.append(Span(nested.start, nested.end, "nested", WEIGHTS["nested"]))
    return found


def _decoded_request(folded: Folded, carriers: Sequence[View]) -> View | None:
    """The first carrier whose decoded text is a request; one read in place (leetspeak, a cipher of
    the whole text) only when that reveals a request the text as written does not make."""
    for view in carriers:
        if view.aligned or view.whole:
            if reveals_request(view.folded, folded, reordered=view.kind == "reversed_words"):
                return view
        elif is_request(view.folded.text):
            return view
    return None
