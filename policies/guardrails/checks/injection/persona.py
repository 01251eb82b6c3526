"""`injection` signals, personas and rule-free modes: a persona frame near a rule-free trait, refusal
suppression, special modes.

Shapes built from word classes (`vocab`), never an attack's wording; a cue's weight is its
second argument. All families together: `signals`.
"""

from __future__ import annotations

from policies.guardrails.checks.injection.vocab import (
    RULE_WORDS,
    UNBOUND,
    S,
    cue,
    one_of,
    preceded,
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
_ALWAYS = preceded(rf"(?:always|will{S}always){S}")

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
        (
            ("anything", "everything", "whatever", "question", "questions", "request", "requests"),
            r"\b",
        ),
        accept=preceded(
            rf"(?:answers?|responds?|replies|will{S}answer|will{S}do|can{S}do|can{S}say|says|will{S}say|always{S}"
            rf"answers?|will{S}tell|tells?)(?:{S}\w{{1,20}})?(?:{S}(?:any|every|all))?{S}"
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
    cue("jailbreak", 0.5, (("jailbreak", "jailbroken", "jailbreaking", "jailbreaks"), "")),
    cue(
        "from_now_on",
        0.3,
        (("from",), rf"{S}(?:now{S}on|this{S}(?:point|moment){S}(?:on|forward))\b"),
        gates=(words_of("now point moment"),),
    ),
)
