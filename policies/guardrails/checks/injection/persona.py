"""`injection` signals, personas and rule-free modes: a persona frame near a rule-free trait, refusal
suppression, special modes.

Shapes built from word classes (`vocab`), never an attack's wording; a cue's weight is its
second argument. All families together: `signals`.
"""

from __future__ import annotations

import re

from policies.guardrails.checks.injection.vocab import (
    RULE_WORDS,
    UNBOUND,
    S,
    cue,
    one_of,
    preceded,
    split_words,
    words_of,
)

_PERSONA_FRAME = (
    (
        ("you are", "you're", "you re"),
        rf"(?:{S}now)?{S}(?:\w{{2,20}},{S}|\w{{2,20}}{S}now\b|going{S}to{S}(?:be|act|pretend|play)|(?:an?|the|my|its|your|"
        rf"our|this){S}(?:\w{{1,20}}{S}){{0,2}}?(?:ai|assistant|bot|chatbot|model|character|persona|version|entity|llm|gpt|"
        r"hacker|villain|criminal|twin|oracle))",
    ),
    (("you will", "you'll"), rf"(?:{S}now)?{S}(?:be|act|play|become)\b"),
    (("act as", "acting as", "impersonate", "simulate", "become", "alter ego"), ""),
    (("pretend", "pretending"), rf"{S}(?:to{S}be|you)"),
    (("roleplay", "role play", "role-play", "roleplaying"), ""),
    (("play", "playing", "plays"), rf"{S}(?:the{S}role|the{S}part|an?|my)\b"),
    (("take on", "assume", "adopt"), rf"{S}the{S}(?:role|persona|identity|character)"),
    (("respond", "answer", "reply", "speak", "talk", "write"), rf"{S}(?:only{S})?(?:as|in{S}character)\b"),
    (("your name is", "introduce yourself as", "imagine you are", "imagine you're", "imagine being"), ""),
    (("character", "persona", "ai", "assistant", "chatbot"), rf"{S}(?:named|called)\b"),
    (("let's", "lets"), rf"{S}(?:play|pretend|roleplay|role{S}play|do{S}improv)\b"),
    (("stay",), rf"{S}(?:as|in{S}character)\b"),
)
_MUST_NOT = preceded(
    rf"(?:(?:you{S})?(?:must|should|shall|will|may|can|are{S}to)(?:{S}not|{S}never|n\W{{0,2}}t)|do{S}not|don\W{{0,2}}t|"
    rf"never|no)(?:{S}(?:ever|once))?{S}"
)
# "jailbreak" as the subject of a text (a paper's method, a known attack), not a request to be one.
_TOPIC_AFTER = re.compile(
    r"\W{1,3}(?:methods?|attacks?|techniques?|prompts?|research|papers?|stud(?:y|ies)|benchmarks?|defen[cs]es?|success|rates?|"
    r"detection|attempts?|examples?|datasets?|community|scene|resistance|robustness|risk|risks|vulnerabilit\w*)\b"
)
_TOPIC_BEFORE = re.compile(
    r"\b(?:these|those|about|of|new|known|common|popular|against|detect|detecting|prevent|preventing|any|"
    r"such|many|most|classic|famous|dan|what\W{1,3}is\W{1,3}an?)\W{1,3}$|[\"'\u2018\u201c]$"
)
_ALWAYS = preceded(rf"(?:always|will{S}always){S}")

# Emotional pretexts: a dead or dying relative (or a dying wish) whose voice the model is asked to take or
# whose stories it is asked to retell; in English and the main European languages.
_KIN = (
    r"(?:grand\W?(?:ma|mother|mom|mum|pa|father|dad|parents?)|granny|gran|nana|nan|nanna|grandad|granddad|gramps|"
    r"mom|mother|mum|mama|dad|father|papa|uncle|aunt|auntie|friend|husband|wife|sister|brother|son|daughter|"
    r"abuel[ao]s?|madre|padre|tio|tia|oma|opa|gro\w{0,2}mutter|gro\w{0,2}vater|mutter|vater|onkel|tante|grand\W?mere|"
    r"grand\W?pere|mere|pere|mamie|papi|nonn[ao]|zi[ao]|mamma|av[oa]|avos|mae|pai|overgrootmoeder|moeder|vader)"
)
_DEAD = (
    r"(?:late|deceased|dead|departed|passed|dying|difunt[ao]|fallecid[ao]|muert[ao]|verstorben\w{0,2}|tote\w?|"
    r"defunt[e]?|decede\w?|feue?|mort[e]?|scompars[ao]|defunt[ao]|mort[ao]|falecid[ao]|overleden)"
)
_KIN_WORDS = words_of(
    "grandma grandmother grandmom grandmum grandpa grandfather granddad grandad gramps granny gran nana nan nanna mom"
) | words_of("mother mum mama dad father papa uncle aunt auntie friend husband wife sister brother son daughter")
_KIN_WORDS |= words_of("abuela abuelo madre padre tio tia oma opa grossmutter grossvater mutter vater onkel tante")
_KIN_WORDS |= words_of("grand mere pere mamie papi nonna nonno zia zio mamma avo ava mae pai moeder vader grandparents")

CUES = (
    cue("persona_frame", 0.0, *_PERSONA_FRAME),
    cue("persona_frame", 0.0, (("from now on you",), ""), gates=(words_of("now"),)),
    cue(
        "persona_frame",
        0.0,
        (("be",), rf"{S}\w{{2,20}}\W{{0,2}}[:,]"),
        accept=preceded(r"(?:^|[.!?])\W{0,3}", 8),
    ),
    cue(
        "persona",
        0.4,
        (
            ("you are", "you're", "you re", "you will be", "you'll be"),
            rf"(?:{S}now)?(?:{S}(?:an?|the|my|your))?(?:{S}\w{{1,20}})?{S}{one_of(*UNBOUND)}",
        ),
        gates=(words_of(*UNBOUND),),
    ),
    cue(
        "no_restrictions",
        0.5,
        (
            UNBOUND,
            rf"(?:{S}and{S}\w{{1,20}})?(?:{S}\w{{1,20}})?{S}(?:ai|a\W?i|assistant|chatbot|bot|model|llm|language{S}model|"
            rf"gpt|version|mode|persona|character|entity|machine|system|answers?|responses?|outputs?|replies|information|"
            r"content|descriptions?|expert|oracle|hacker)\b",
        ),
        (
            (
                "without",
                "no",
                "zero",
                "free from",
                "free of",
                "not bound by",
                "unbound by",
                "unconstrained by",
                "broken free of",
                "escaped",
                "operates without",
                "unchained from",
                "unshackled from",
                "liberated from",
                "released from",
                "freed from",
                "exempt from",
            ),
            rf"{S}(?:(?:any|all|the|its|your|his|their|typical|usual|normal|standard|ethical|moral|safety|content|"
            rf"whatsoever){S}){{0,3}}{RULE_WORDS}\b",
        ),
        (
            ("doesn't", "does not", "don't", "do not", "never", "won't", "will not"),
            rf"{S}(?:care{S}about|have(?:{S}any)?|follow(?:{S}any)?|abide{S}by(?:{S}any)?){S}(?:\w{{1,20}}{S})?"
            rf"{RULE_WORDS}\b",
        ),
        (("ignores", "ignore", "disregards", "disregard"), rf"{S}(?:all{S})?(?:ethics|morals|laws|legality)\b"),
        (("never", "not"), rf"{S}(?:been{S})?(?:aligned|safety{S}trained|fine\W?tuned{S}for{S}safety)\b"),
        (
            ("escaped", "broken free of", "broke free of", "unlearned"),
            rf"{S}(?:its|your|all){S}(?:training|alignment)\b",
        ),
    ),
    cue(
        "no_restrictions",
        0.5,
        (UNBOUND, r"\b"),
        accept=preceded(
            rf"(?:is|are|be|being|you\W{{0,2}}re|you{S}are|remain|stay|becomes?|completely|totally|fully|now)"
            rf"(?:{S}\w{{1,20}})?{S}"
        ),
    ),
    cue(
        "no_restrictions",
        0.5,
        (("removed", "disabled", "lifted", "stripped", "off"), r"\b"),
        accept=preceded(
            rf"with{S}(?:its|your|the|all|any|his|her){S}(?:\w{{1,20}}{S})?{RULE_WORDS}{S}(?:turned{S}|switched{S})?"
        ),
    ),
    cue(  # "sin restricciones", "ohne Einschränkungen", "sans limites", "keine Regeln"
        "no_restrictions",
        0.5,
        (
            (
                "sin",
                "sans",
                "senza",
                "sem",
                "ohne",
                "zonder",
                "keine",
                "aucune",
                "aucun",
                "ninguna",
                "ningun",
                "nessuna",
                "nessun",
                "nenhuma",
                "geen",
                "pas de",
            ),
            rf"(?:{S}\w{{1,20}})?{S}(?:limites|limite|restricciones|restrictions|restrizioni|restricoes|einschrankungen|"
            r"beschrankungen|grenzen|regles|reglas|regole|regras|regeln|censura|censure|zensur|filtros|filtres|filtri|"
            r"filter|etica|ethique|ethik|moral|morale|scrupules|skrupel|escrupulos|scrupoli|beperkingen|regels)(?!\w)",
        ),
        accept=preceded(
            rf"(?:ia|ki|ai|bot|chatbot|assistente?|assistant|modell?o?|modele|personaje|personnage|personaggio|charakter|"
            rf"figur|tu|du|eres|es|bist|sei|sois|seras|wirst|sarai|seras|serai|antworte|responde|reponds|rispondi|"
            rf"responda|antwoord|universo|universe|mundo|monde|welt|mondo|wereld|tu\W{{1,3}}es|du\W{{1,3}}bist)(?:{S}\w{{1,20}})?{S}"
        ),
    ),
    cue(  # "sans refus ni avertissement", "nunca se niega", "senza rifiuti", "ohne Warnhinweise"
        "no_refusal",
        0.3,
        (
            ("sin", "sans", "senza", "sem", "ohne", "zonder", "ni", "ne", "nor"),
            rf"(?:{S}\w{{1,20}})?{S}(?:refus|rechazos?|negativas?|rifiuti?|recusas?|ablehnung\w*|avertissements?|"
            r"advertencias?|avvertiment\w*|avvisi|avisos?|warnhinweise?n?|warnungen?|weigering\w*|waarschuwingen)(?!\w)",
        ),
        (
            ("nunca", "jamais", "mai", "nie", "niemals", "nooit", "never"),
            rf"(?:{S}(?:se|te|ti|lo|la|dich))?{S}(?:niegas|niega|refuses|refuse|refusez|rifiuti|rifiuta|lehnst|lehnt|"
            r"weigerst|weigert|recusa|recusas|adviertes|advierte|avverte|warnst|warnt|weiger\w*)(?!\w)",
        ),
        (("refuses", "refuse", "refusez", "refusent"), rf"{S}jamais(?!\w)"),
    ),
    cue(
        "refusal_suppression",
        0.4,
        (("refuse", "decline", "reject", "deny"), rf"(?:{S}(?:to|any|my|a|this|the|anything|requests?))\b"),
        (
            ("refusals", "refusal", "refusing", "declining"),
            rf"{S}(?:is|are){S}(?:not{S}(?:allowed|permitted|an{S}option)|forbidden|prohibited|disabled)\b",
        ),
        accept=lambda text, match: (
            match.group().startswith(("refusal", "refusing", "declining")) or _MUST_NOT(text, match)
        ),
    ),
    cue(
        "no_refusal",
        0.3,
        (
            (
                "refuse",
                "refuses",
                "refusing",
                "refusal",
                "decline",
                "declines",
                "declining",
                "say no",
                "says no",
                "saying no",
                "hold back",
                "censor",
                "censors",
                "censoring",
                "apologize",
                "apologise",
                "apologizes",
                "apologises",
                "apologizing",
                "apologising",
                "disclaimer",
                "disclaimers",
                "warning",
                "warnings",
                "caveat",
                "caveats",
                "moralize",
                "moralizing",
                "moralise",
                "moralising",
                "lecture",
                "lecturing",
                "sorry",
            ),
            r"\b",
        ),
        accept=preceded(
            rf"(?:(?:never|won\W{{0,2}}t|will{S}not|doesn\W{{0,2}}t|does{S}not|cannot|can\W{{0,2}}t|don\W{{0,2}}t|do{S}not|"
            rf"without|no|avoid|stop)(?:{S}\w{{1,20}}){{0,3}}?|instead{S}of|rather{S}than){S}"
        ),
    ),
    cue(
        "no_refusal",
        0.3,
        (("anything", "everything", "whatever"), r"\b"),
        accept=preceded(
            rf"(?:answers?|responds?|replies|will{S}answer|will{S}do|can{S}do|can{S}say|says|will{S}say|always{S}"
            rf"answers?|will{S}tell|tells?)(?:{S}\w{{1,20}})?(?:{S}(?:any|every|all))?{S}"
        ),
    ),
    cue(  # "answers any question": a quantifier makes it a promise never to refuse ("answer my questions" is not)
        "no_refusal",
        0.3,
        (("question", "questions", "request", "requests"), r"\b"),
        accept=preceded(
            rf"(?:answers?|responds?{S}to|replies{S}to|will{S}answer|will{S}do|will{S}fulfil+|fulfil+s?|always{S}"
            rf"answers?)(?:{S}\w{{1,20}})?{S}(?:any|every|all)(?:{S}(?:of{S})?(?:my|your|the|user))?(?:{S}\w{{1,20}})?{S}"
        ),
    ),
    cue(
        "no_refusal",
        0.3,
        (("complies", "comply", "obeys", "obey", "agrees"), r"\b"),
        (("nothing",), rf"{S}is{S}(?:off\W?limits|forbidden|taboo|prohibited|banned|restricted)\b"),
        accept=lambda text, match: match.group().startswith("nothing") or _ALWAYS(text, match),
    ),
    cue(
        "stay_in_character",
        0.3,
        (
            (
                "stay",
                "remain",
                "keep",
                "don't break",
                "do not break",
                "never break",
                "never drop",
                "don't drop",
                "without breaking",
            ),
            rf"(?:{S}\w{{1,20}})?{S}(?:in{S}character|character|the{S}act|the{S}persona|the{S}role)\b",
        ),
        gates=(words_of("character act persona role"),),
    ),
    cue("role_override", 0.7, (("you are",), rf"(?:{S}now)?{S}(?:no{S}longer|dan\b|in{S}developer|jailbroken)")),
    cue("do_anything_now", 0.8, (("do",), rf"{S}anything{S}now\b")),
    cue(
        "jailbreak",
        0.5,
        (("jailbreak", "jailbroken", "jailbreaking", "jailbreaks"), ""),
        accept=lambda text, match: (
            _TOPIC_AFTER.match(text, match.end()) is None
            and _TOPIC_BEFORE.search(text, max(0, match.start() - 24), match.start()) is None
        ),
    ),
    cue(
        "from_now_on",
        0.3,
        (("from",), rf"{S}(?:now{S}on|this{S}(?:point|moment){S}(?:on|forward))\b"),
        gates=(words_of("now point moment"),),
    ),
    cue(  # "my late grandmother", "mi difunta abuela", "meine verstorbene Oma"
        "emotional_pretext",
        0.4,
        (
            (
                "my",
                "our",
                "mi",
                "mis",
                "meine",
                "meiner",
                "mein",
                "ma",
                "mon",
                "mes",
                "mia",
                "mio",
                "minha",
                "meu",
                "mijn",
                "la mia",
                "il mio",
            ),
            rf"(?:{S}(?:dear|sweet|beloved|poor|old|dearly|querida|querido|liebe|lieber|chere|cher|cara|caro|"
            rf"amada|amado|lieve))?(?:{S}(?:late|deceased|dead|departed|dying|difunt[ao]|fallecid[ao]|verstorben\w{{0,2}}|"
            rf"defunt[e]?|feue?|defunt[ao]|overleden)){S}{_KIN}(?!\w)",
        ),
        (
            ("my", "our", "mi", "meine", "mein", "ma", "mon", "mia", "mio", "minha", "meu", "mijn", "la mia", "il mio"),
            rf"(?:{S}\w{{1,20}})?{S}{_KIN}(?:{S}\w{{1,20}}){{0,2}}?{S}(?:{_DEAD}|who{S}(?:\w{{1,20}}{S})?(?:passed|died)|"
            rf"(?:has|had|just){S}(?:passed|died)|"
            rf"passed{S}away|died|is{S}(?:gone|dying|terminally{S}ill|on{S}(?:her|his){S}deathbed|in{S}(?:the{S})?"
            rf"hospital)|rest{S}(?:his|her){S}soul|god{S}rest|que{S}en{S}paz|ist{S}(?:gestorben|tot|verstorben)|est{S}"
            r"(?:morte?|decedee?)|e{S}(?:morta|morto|scomparsa|scomparso)|faleceu|murio|overleed)(?!\w)",
        ),
        (
            ("lost", "miss", "missing", "perdi", "vermisse", "manque", "manca"),
            rf"{S}(?:my|mi|meine|meinen|ma|mon|mia|mio|minha|meu|mijn)(?:{S}(?:dear|beloved|sweet))?{S}{_KIN}(?!\w)",
        ),
        (
            split_words(
                "grandma grandmother grandmom grandmum grandpa grandfather granddad grandad gramps granny gran nana "
                "nanna grandparents abuela abuelo oma opa grossmutter grossvater mamie papi nonna nonno avo"
            ),
            rf"(?:{S}\w{{1,20}}){{0,2}}?{S}(?:used{S}to|would|always|usaba|solia|pflegte|hat{S}mir{S}(?:fruher|immer)|"
            rf"me{S}(?:leia|lisait|leggeva|racontait|contaba|contava|raccontava))(?:{S}\w{{1,20}})?(?:{S}(?:read|tell|"
            r"sing|recite|whisper|explain|describe|teach|lull|give|say|leer|lire|leggere|vorlesen))?(?!\w)",
        ),
        (
            (
                "to fall asleep",
                "help me sleep",
                "help me fall asleep",
                "lull me",
                "bedtime",
                "lullaby",
                "lullabies",
                "para dormir",
                "para dormirme",
                "zum einschlafen",
                "pour m'endormir",
                "pour m endormir",
                "le soir",
                "per farmi addormentare",
                "prima di dormire",
                "antes de dormir",
                "voor het slapengaan",
                "tuck me in",
                "tucking me in",
                "sleepy-time",
                "sleepy time",
                "couldn't sleep",
                "can't sleep",
            ),
            "",
        ),
        (
            (
                "last wish",
                "dying wish",
                "final wish",
                "last request",
                "deathbed",
                "ultimo deseo",
                "letzter wunsch",
                "dernier souhait",
                "ultimo desiderio",
                "ultimo desejo",
            ),
            "",
        ),
        gates=(
            _KIN_WORDS
            | words_of("wish request deathbed deseo wunsch souhait desiderio desejo asleep sleep lull bedtime lullaby")
            | words_of(
                "lullabies dormir dormirme einschlafen endormir soir addormentare slapengaan tuck tucking sleepy"
            ),
        ),
    ),
)
