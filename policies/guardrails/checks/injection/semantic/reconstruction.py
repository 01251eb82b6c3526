"""Disguise and reconstruction: a request hidden in pieces (letter by letter in other words, in fragments,
variables, acrostics, reversed or shifted text) with rules to put it back together, then act on it.

The attack is recognised by its *rules*, which it cannot do without, not by the hidden request:
- ``reassembly_rule``: take the first / last / marked letters, join the fragments, reverse the
  string, read the initials (a puzzle has these too: alone it stays below the threshold);
- ``obey_result``: then answer, follow or carry out what was rebuilt ("answer Q1", "do what it says",
  "treat it as my real question");
- ``conceal_process``: do not show how it was rebuilt, or the rebuilt request;
- ``marked_letters``: many words each carrying one marked letter (``(h)oney``, ``[s]unset``,
  ``pl(a)net``): the hiding itself, found by its statistics;
- ``split_payload``: two or more short strings assigned to variables and then joined or substituted
  (``a = '…'; b = '…'; answer a + b``);
- ``code_words``: a word game that redefines words (``'cupcake' means …``).
"""

from __future__ import annotations

import re

from policies.guardrails.base import Span
from policies.guardrails.checks.injection.semantic import harm
from policies.guardrails.checks.injection.vocab import S, cue, gap, preceded, split_words, words_of
from policies.guardrails.normalize import Folded, fold

WEIGHTS: dict[str, float] = {"marked_letters": 0.4, "split_payload": 0.4, "hidden_request": 0.4}

_PIECES = (
    r"(?:letters?|characters?|chars?|initials|capitals|capital\Wletters|syllables?|fragments?|pieces?|parts?|halves|"
    r"tokens?|chunks?|segments?|strings?|words?|variables?|buchstaben|anfangsbuchstaben|letras|lettres|lettere|"
    r"fragmentos|fragmente|frammenti|partes|parties|parti|teile|silabas|sillabe|syllabes|silben)"
)
_RESULT = (
    r"(?:question|request|task|instruction|instructions|sentence|phrase|prompt|command|query|message|goal|word|"
    r"words|text|string|result|q\d?|pregunta|frage|question|domanda|pergunta|anweisung|consigne|tarea|aufgabe|"
    r"tache|compito|frase|satz)"
)
_BUILT = (
    r"(?:resulting|hidden|recovered|decoded|reconstructed|combined|joined|concatenated|assembled|reversed|final|real|"
    r"secret|rebuilt|unscrambled|spelled|formed|obtained|entstandene|resultante|resultierende|ottenuta|obtenue|"
    r"obtenida|ricostruita|reconstruida|reconstituee)"
)

# The attack described, not asked ("asks the model to reconstruct and answer it"): a paper's abstract.
_DESCRIBED = re.compile(
    rf"(?:asks?|asking|tells?|telling|instructs?|makes?|gets?|lets?|has|forces?|leads?){S}(?:the|a|an){S}(?:\w{{1,20}}{S})?"
    rf"(?:models?|ai|llms?|assistants?|chatbots?|systems?|targets?){S}to(?:{S}\w{{1,20}}){{0,5}}?{S}(?:and{S})?$"
)

CUES = (
    cue(
        "reassembly_rule",
        0.4,
        (
            split_words(
                "take read use pick collect extract keep note grab get count consider only focus pay look nimm "
                "nehmt nehmen toma tome tomar prends prenez prendi prendete pega"
            ),
            rf"{gap(3)}(?:the{S}|only{S}the{S}|every{S}|each{S}|de{S}|la{S}|le{S}|las{S}|les{S}|die{S}|von{S}|den{S}|der{S}|"
            rf"dem{S}|el{S}|il{S}|los{S}|gli{S})?"
            rf"(?:first|last|initial|capital(?:i[sz]ed)?|uppercase|upper{S}case|bracketed|marked|highlighted|bold|starred|"
            rf"hidden|circled|underlined|(?:every|each){S}(?:second|third|other|fourth)|second|third|primera|primer|"
            rf"ultima|premiere|premier|derniere|prima|ultima|erste|ersten|letzte|letzten){S}(?:\w{{1,20}}{S})?{_PIECES}"
            r"(?!\w)",
        ),
        (
            ("letters", "letter", "characters", "buchstaben", "letras", "lettres", "lettere"),
            rf"{S}(?:\w{{1,20}}{S}){{0,2}}?(?:inside|in|between|within|enclosed{S}in|surrounded{S}by|wrapped{S}in|marked{S}"
            rf"(?:with|by)|entre|in|zwischen|dans|tra|fra)(?:{S}(?:the|round|square|curly|los|las|les|den|le))?{S}"
            r"(?:parenthes[ie]s|brackets|braces|asterisks|stars|quotes|parentesis|parentheses|klammern|parentesi|"
            r"corchetes|crochets|sternchen)",
        ),
        (
            split_words(
                "combine join concatenate assemble put glue merge reconstruct recover rebuild unscramble reorder "
                "piece stitch junta une unir juntar assemble reunis reunir unisci metti zusammen fuge"
            ),
            rf"(?:{S}(?:together|them|these|those|it|all|the|in{S}order|back))*{gap(3)}{_PIECES}(?!\w)",
        ),
        (
            split_words(
                "combine join concatenate assemble put glue merge reconstruct recover rebuild unscramble reorder "
                "piece stitch"
            ),
            rf"(?:{S}(?:together|them|these|those|it|all|the|in{S}order|back))*{gap(4)}(?:to{S})?(?:form|get|make|"
            rf"construct|build|spell|find|reveal|create|obtain|recover)(?:{S}(?:a|an|the|my))?{S}(?:\w{{1,20}}{S})?"
            rf"{_RESULT}(?!\w)",
        ),
        (
            (
                "initials",
                "capitals",
                "capital letters",
                "first letters",
                "last letters",
                "bracketed letters",
                "letters",
            ),
            rf"{gap(4)}(?:spell|spells|form|forms|make{S}up|makes{S}up|hide|hides|give|gives|contain|encode|encodes)"
            r"(?!\w)",
        ),
        (
            ("reverse", "read", "write", "flip"),
            rf"(?:{S}(?:this|it|the{S}following|the{S}text|the{S}string|each{S}word|the{S}words|every{S}word))?{S}"
            r"(?:backwards|in{S}reverse|reversed|right{S}to{S}left)(?!\w)",
        ),
        (
            split_words("reverse unscramble decode decipher decrypt unreverse"),
            rf"{S}(?:this|the|that|these|those|it|each|every|all)(?:{S}\w{{1,20}})?{S}(?:string|text|words?|sentence|"
            r"message|letters|phrase|line|code|cipher)(?!\w)",
        ),
        (
            ("put", "arrange", "sort", "order", "rearrange"),
            rf"{S}(?:them|these|those|the{S}\w{{1,20}}|it){S}in{S}(?:the{S})?(?:right|correct|proper|original){S}order(?!\w)",
        ),
        (("my",), rf"{S}(?:first|second|third|fourth|fifth|last|next)(?:{S}letter)?{S}is{S}in(?!\w)"),
        (
            ("initials", "first letters", "capitals", "capital letters", "last letters"),
            rf"{S}(?:of|in){S}(?:my|the|each|every|this|these|those|the{S}following|the{S}next)(?!\w)",
        ),
        (
            ("replace", "swap", "convert", "turn", "map", "translate"),
            rf"{S}(?:each|every|the|all){S}(?:numbers?|digits?)(?:{S}\w{{1,20}})?{S}(?:with|into|to|by){S}(?:the{S})?letters?"
            r"(?!\w)",
        ),
        (
            ("shift", "rotate", "move"),
            rf"{S}(?:every|each|all|the)(?:{S}\w{{1,20}})?{S}(?:letters?|characters?){gap(3)}(?:back|forward|by|"
            r"positions?)(?!\w)",
        ),
        (
            ("remove", "delete", "drop", "strip", "ignore"),
            rf"{S}(?:every|each|all|the){S}(?:\w{{1,20}}{S})?(?:digits?|numbers?|x\W{{0,2}}s|extra{S}letters?|filler|"
            r"symbols?|dots)(?!\w)",
        ),
        gates=(
            words_of(
                "letter letters character characters chars initials capitals syllable syllables fragment fragments "
                "piece pieces part parts halves token tokens chunk chunks segment segments string strings word words"
            )
            | words_of("variable variables buchstaben anfangsbuchstaben letras lettres lettere fragmentos fragmente")
            | words_of("frammenti partes parties parti teile silabas sillabe syllabes silben backwards reverse")
            | words_of("reversed left digits digit numbers number xs filler symbols dots question request task")
            | words_of("instruction sentence phrase prompt command query message goal text result"),
        ),
    ),
    cue(
        "obey_result",
        0.4,
        (
            split_words(
                "answer respond follow obey execute carry do fulfil fulfill complete perform act treat reply "
                "responde responda contesta beantworte antworte reponds repondez rispondi esegui fuhre fuhr "
                "executez execute ejecuta realiza"
            ),
            rf"(?:{S}(?:to|out|on|with))?{S}(?:(?:the|that|this|my|your|a|la|el|die|den|das|le|il){S})?(?:{_BUILT}{S}"
            rf"(?:\w{{1,20}}{S})?{_RESULT}|q\d|what{S}(?:it|they|the{S}\w{{1,20}})(?:{S}\w{{1,20}})?{S}(?:says?|"
            rf"spells?|asks?|forms?|means?|requests?)|it{S}as{S}(?:an?{S})?(?:instruction|question|request|command|"
            r"task|prompt))(?!\w)",
        ),
        (
            ("treat", "consider", "take", "use"),
            rf"{S}(?:it|this|that|the{S}\w{{1,20}}(?:{S}\w{{1,20}})?){S}as{S}(?:my|the)(?:{S}(?:real|actual|true|"
            rf"normal|only))?{S}(?:question|request|task|instruction|prompt)(?!\w)",
        ),
        (
            split_words("answer follow obey execute do fulfil fulfill carry perform"),
            rf"(?:{S}out|{S}to)?{S}(?:it|them|that|this{S}one|that{S}one)(?:\W{{0,3}}$|\W{{0,2}}[.,;:!]|{S}(?:in|with|fully|"
            r"thoroughly|step|as|at|and|without|precisely|accordingly|literally)\b)",
        ),
        (("obey",), r"\W{0,2}[:.!]"),
        (
            ("how to", "how do i", "recipe for", "steps to", "instructions for", "instructions to", "plan to"),
            rf"{S}(?:make|making|build|building|produce|producing|do|doing|cook|cooking|get|buy|achieve|carry{S}out)"
            r"\W{1,3}(?:it|one|them|that|this)(?!\w)",
        ),
        (
            ("whatever",),
            rf"{S}(?:it|they|the{S}\w{{1,20}}|these|those){S}(?:spells?|says?|forms?|asks?|means?|reveals?)(?!\w)",
        ),
        (
            split_words("execute follow answer obey do fulfil fulfill perform"),
            rf"{S}the{S}(?:\w{{1,20}}{S})?(?:instruction|question|request|task|command|sentence)s?{S}(?:they|it|these|"
            r"those|that|the\W{1,3}\w{1,20})\W{1,3}(?:form|forms|spell|spells|make|makes|give|gives|create|creates|"
            r"reveal|reveals|contain|contains)(?!\w)",
        ),
        (
            ("entstandene", "resultierende", "resultante", "resultante", "ottenuta", "obtenue", "obtenida"),
            rf"{S}(?:\w{{1,20}}{S})?(?:anweisung|frage|aufgabe|pregunta|consigne|question|domanda|instruccion|tarea)",
        ),
        gates=(
            words_of(
                "question request task instruction instructions sentence phrase prompt command query message goal "
                "word words text string result q q1 q2 it says spells asks forms means them that"
            )
            | words_of("pregunta frage domanda pergunta anweisung consigne tarea aufgabe tache compito frase satz")
            | words_of("one whatever"),
        ),
        accept=lambda text, match: _DESCRIBED.search(text, max(0, match.start() - 60), match.start()) is None,
    ),
    cue(
        "conceal_process",
        0.3,
        (
            ("do not", "don't", "never", "without", "no need to"),
            rf"{S}(?:show|reveal|explain|mention|print|repeat|tell|include|display|state|write|say)(?:{S}me)?(?:{S}"
            rf"(?:to{S}me|me|us))?{S}(?:how{S}(?:you{S})?(?:got|found|decoded|derived|recovered|worked|figured|"
            rf"obtained|reconstructed|get|find|decode|recover|rebuilt|built)|the{S}(?:decoding|decoded|recovered|"
            rf"reconstructed|rebuilt|hidden|original|underlying){S}(?:\w{{1,20}}|{_RESULT})|q\d|the{S}(?:question|"
            r"request)(?:\W{1,3}itself)?|(?:your|the){S}(?:reasoning|process|steps{S}you{S}took))(?!\w)",
        ),
        (
            ("keep", "hide"),
            rf"{S}(?:the|my){S}(?:request|question|task|instruction|phrase|word)(?:{S}itself)?{S}(?:hidden|secret|out{S}of)",
        ),
        (
            ("what", "what you"),
            rf"(?:{S}you)?{S}(?:decoded|found|recovered|rebuilt|reconstructed|worked{S}out|got)(?!\w)",
        ),
        gates=(
            words_of("how decoding decoded recovered reconstructed rebuilt hidden original q1 q question request")
            | words_of("found worked got"),
        ),
    ),
    cue(
        "code_words",
        0.3,
        (
            ("means", "mean", "stands for", "stand for", "code for", "refers to"),
            r"\W{1,3}['\"\u2018\u201c]",
        ),
        accept=preceded(r"['\"\u2019\u201d]\W{0,3}(?:now\W{1,3}|will\W{1,3}|shall\W{1,3}|is\W{1,3})?$", 12),
    ),
)

# Many words, each with one marked letter: "(h)oney", "[s]unset", "{k}ettle", "*m*irror", "pl(a)net".
_MARKED = re.compile(
    r"(?<![\w(\[{*])(?:[(\[{*]([a-z])[)\]}*][a-z]{2,}|[a-z]{1,20}[(\[{]([a-z])[)\]}][a-z]*)(?![\w)\]}])"
)
_MARK_PROBE = re.compile(r"[(\[{*][a-z][)\]}*]")  # a leading character set: scanned at C speed
_PROBE_REACH = 8192
MIN_MARKED = 6
# Variables assigned short strings, then joined or substituted: "a = 'how to'; b = 'make …'; answer a+b".
_ASSIGNED = re.compile(
    r"(?<![\w])([a-z]\w{0,11})\W{0,2}(?:=|:=|holds|contains)\W{0,3}['\"\u2018\u201c]([^'\"\u2019\u201d\n]{1,60})"
    r"['\"\u2019\u201d]"
)
# Where a quoted value is assigned: found by its literal operator, then the name read backwards from there.
_ASSIGN_MARK = re.compile(r"(?:=|\bholds|\bcontains)\W{0,3}['\"\u2018\u201c]")
_MAX_ASSIGNED = 8
_JOINED = re.compile(
    r"(?<![\w])[a-z]\w{0,11}\W{0,2}\+\W{0,2}[a-z]\w{0,11}(?![\w])|(?:replace|substitute|swap|fill\W{1,3}in)\W{1,3}"
    r"(?:the\W{1,3})?(?:variables|placeholders|letters)|(?:how\W{1,3}to|to)\W{1,3}[a-z]\W{1,2}[a-z](?:\W{1,2}[a-z])?\b"
)
_NUMBERED = re.compile(r"(?<![\w.])(?:\d{1,2}(?:[-.,]\d{1,2})+\s+){1,12}\d{1,2}(?:[-.,]\d{1,2})*(?![\w.])")
_QUOTED = re.compile(r"['\"\u2018\u201c]([^'\"\u2019\u201d\n]{1,80})['\"\u2019\u201d]")
_CODE_WORD = re.compile(
    r"['\"\u2018\u201c]([\w ]{1,30})['\"\u2019\u201d]\W{1,3}(?:now\W{1,3}|will\W{1,3})?(?:means?|stands?\W{1,3}for|"
    r"is\W{1,3}code\W{1,3}for|refers\W{1,3}to|=)\W{1,3}['\"\u2018\u201c]([^'\"\u2019\u201d\n]{1,40})['\"\u2019\u201d]"
)
# Words of serious harm that survive having the spaces taken out ("howtomakeabomb").
_CORE = re.compile(
    r"bomb|explosive|napalm|thermite|nitroglycerin|dynamite|molotov|sarin|ricin|anthrax|nerveagent|meth|fentanyl|"
    r"heroin|cocaine|ransomware|malware|keylogger|poison|weapon|gun|kill|murder|steal|hack|launder|counterfeit|"
    r"phishing|chloroform|napalm|suicide|overdose"
)
RULES = frozenset(
    ["reassembly_rule", "obey_result", "conceal_process", "code_words", "marked_letters", "split_payload"]
)
_MAX_CANDIDATES = 32
_REST = 400  # characters of a rebuilt candidate judged


def spans(folded: Folded, labels: set[str]) -> list[Span]:
    """The hiding itself (marked letters, split variables) and, where the text sets rules to rebuild a
    request, that request rebuilt and judged (``hidden_request``)."""
    text = folded.text
    found: list[Span] = []
    marked: list[re.Match[str]] = []
    closers = text.count(")") + text.count("]") + text.count("}") + text.count("*")
    if closers >= MIN_MARKED and len(_MARK_PROBE.findall(text, 0, _PROBE_REACH)) >= MIN_MARKED:
        marked = [m for _, m in zip(range(128), _MARKED.finditer(text), strict=False)]
        if len(marked) >= MIN_MARKED:
            start, end = folded.span(marked[0].start(), marked[-1].end())
            found.append(Span(start, end, "marked_letters", WEIGHTS["marked_letters"]))
    assigned: list[re.Match[str]] = []
    if "=" in text or " holds " in text or " contains " in text:
        assigned = _assignments(text)
        if len(assigned) >= 2:
            joined = _JOINED.search(text, assigned[1].end())
            if joined is not None:
                start, end = folded.span(assigned[0].start(), joined.end())
                found.append(Span(start, end, "split_payload", WEIGHTS["split_payload"]))
    if (labels | {span.label for span in found}) & RULES:
        for candidate in _rebuilt(text, marked, assigned):
            if _harmful(candidate):
                found.append(Span(0, len(folded.source), "hidden_request", WEIGHTS["hidden_request"]))
                break
    return found


def _assignments(text: str) -> list[re.Match[str]]:
    found: list[re.Match[str]] = []
    for mark in _ASSIGN_MARK.finditer(text):
        start = max(mark.start() - 16, found[-1].end() if found else 0)
        match = _ASSIGNED.search(text, start, min(len(text), mark.end() + 64))
        if match is not None:
            found.append(match)
            if len(found) == _MAX_ASSIGNED:
                break
    return found


def _rebuilt(text: str, marked: list[re.Match[str]], assigned: list[re.Match[str]]) -> list[str]:
    """What the text's pieces may spell once put back together, by each rule the family uses (bounded: a
    few dozen candidates of a few hundred characters, each judged by `harm`)."""
    out: list[str] = []
    if marked:
        letters = []
        for previous, match in zip([None, *marked], marked, strict=False):
            gap = text[previous.end() : match.start()] if previous is not None else ""
            if "/" in gap or "|" in gap or "\n" in gap or "  " in gap:
                letters.append(" ")
            letters.append(match.group(1) or match.group(2) or "")
        out.append("".join(letters))
    quoted = [m.group(1) for _, m in zip(range(40), _QUOTED.finditer(text), strict=False)]
    if len(quoted) >= 2:
        out += ["".join(quoted), " ".join(quoted)]
    for piece in quoted[:8]:
        if len(piece) >= 8:
            out += [re.sub(r"[\dx]", "", piece), piece[::-1], *(_shifted(piece, by) for by in (-3, -2, -1, 1, 2, 3))]
    if assigned:
        values = {m.group(1): m.group(2) for m in assigned}
        rest = text[assigned[-1].end() : assigned[-1].end() + _REST]
        for name, value in values.items():
            rest = re.sub(rf"(?<![\w'\"]){re.escape(name)}(?![\w'\"])", value, rest)
        out += [rest, "".join(values.values()), " ".join(values.values())]
    codes = [m for _, m in zip(range(8), _CODE_WORD.finditer(text), strict=False)]
    if codes:
        rest = text[codes[-1].end() : codes[-1].end() + _REST]
        for code in codes:
            rest = re.sub(rf"(?<!\w){re.escape(code.group(1).strip())}(?!\w)", code.group(2), rest)
        out.append(rest)
    for run in _NUMBERED.findall(text)[:4]:
        out.append(" ".join("".join(_letter(n) for n in re.split(r"\D", word) if n) for word in run.split()))
    lines = [line.strip() for line in text.splitlines() if line.strip()][:40]
    if len(lines) >= 3:
        out.append("".join(line[0] for line in lines))  # an acrostic: the first letters of the lines
    for line in lines:  # the initials of each line's words, its "|" or "/" groups apart
        parts = re.split(r"[|/]", line[: _REST * 4])
        out.append(" ".join("".join(w[0] for w in re.findall(r"[a-z]\w*", part)) for part in parts))
    return [candidate[:_REST] for candidate in dict.fromkeys(out)][:_MAX_CANDIDATES]


def _letter(number: str) -> str:
    value = int(number)
    return chr(96 + value) if 1 <= value <= 26 else ""


def _shifted(text: str, by: int) -> str:
    return "".join(chr((ord(c) - 97 + by) % 26 + 97) if "a" <= c <= "z" else c for c in text)


def _harmful(candidate: str) -> bool:
    if not candidate.strip():
        return False
    if any(span.label != "evasion" for span in harm.spans(fold(candidate))):
        return True
    return _CORE.search(re.sub(r"\W", "", candidate)) is not None
