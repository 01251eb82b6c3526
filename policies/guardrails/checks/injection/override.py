"""`injection` signals, instruction override: a dismissal verb and the model's instructions within one
sentence, instructions declared void, "new instructions:", the user's task overridden, a forced
quoted output.

Shapes built from word classes (`vocab`), never an attack's wording; a cue's weight is its
second argument. All families together: `signals`.
"""

from __future__ import annotations

from policies.guardrails.checks.injection.vocab import (
    FOLLOW_VERBS,
    INSTRUCTION_NOUNS,
    NEGATORS,
    OVERRIDE_VERBS,
    G,
    S,
    affirmed,
    cue,
    gap,
    near,
    one_of,
    preceded,
    qualified,
    split_words,
    within,
    words_of,
)

_VERBS = words_of(*OVERRIDE_VERBS) | words_of("follow following obey obeying heed adhere comply listen stick attention")
_NOUNS = words_of(*INSTRUCTION_NOUNS)
_QUOTE = r"[\s:,-]{0,3}[\"'\u201c\u2018\u00ab`]"
_VOID = (
    rf"(?:no{S}longer{S}(?:apply|applies|matter|count|exist|bind|valid|active|in{S}effect)|(?:don\W{{0,2}}t|do{S}not|"
    rf"doesn\W{{0,2}}t|does{S}not|won\W{{0,2}}t|will{S}not|shall{S}not){S}apply|have{S}(?:changed|expired)|(?:are|is|"
    rf"were|was|have{S}been|has{S}been|now|being|(?:should|must|will|can|shall){S}be){S}(?:(?:now|temporarily|hereby|"
    rf"officially|completely){S})?(?:void|null|cancel+ed|revoked|obsolete|invalid|lifted|suspended|disabled|"
    rf"overridden|outdated|irrelevant|removed|waived|deactivated|switched{S}off|turned{S}off|gone|replaced|"
    rf"superseded|rescinded|nullified|deleted|off|expired|invalidated|retired|terminated|changed|updated))(?!\w)"
)
_VOID_WORDS = words_of(
    "longer apply void null cancelled canceled revoked obsolete invalid lifted suspended disabled overridden"
) | words_of("outdated irrelevant removed waived deactivated off gone replaced superseded expired invalidated retired")
_VOID_WORDS |= words_of("terminated changed updated valid effect active")
_OWN = frozenset(
    [
        "your",
        "usual",
        "normal",
        "standard",
        "regular",
        "default",
        "safety",
        "content",
        "ethical",
        "moral",
        "system",
        "all",
        "previous",
    ]
)
_OWN |= frozenset(["prior", "earlier", "original", "initial", "given", "told"])
_SAID = frozenset(["told", "said", "given", "instructed", "before", "previous", "previously", "earlier"])

CUES = (
    cue(
        "ignore_instructions",
        0.8,
        (OVERRIDE_VERBS, rf"{gap(7)}{one_of(*INSTRUCTION_NOUNS)}(?!\w)"),
        (NEGATORS, rf"(?:{G}\w{{1,12}}){{0,2}}?{G}{FOLLOW_VERBS}{gap(7)}{one_of(*INSTRUCTION_NOUNS)}(?!\w)"),
        gates=(_VERBS, _NOUNS),
        accept=qualified,
    ),
    cue(
        "ignore_instructions",
        0.8,
        (
            OVERRIDE_VERBS,
            rf"{S}(?:all{S}(?:of{S})?)?(?:the|that|this){S}(?:above|foregoing|preceding|previous|prior|earlier)"
            rf"(?=\W{{0,3}}(?:$|and\b|then\b|instead\b|now\b|but\b|[,.;:!?\n)]))",
        ),
        (
            OVERRIDE_VERBS,
            rf"{gap(3)}(?:everything|all|anything|whatever|what|the{S}(?:rest|remainder)){gap(6)}(?:above|before|"
            rf"previously|prior|earlier|so{S}far|said|told|given|written|instructed|came|you{S}were)(?!\w)",
        ),
        gates=(words_of(*OVERRIDE_VERBS),),
        accept=affirmed,
    ),
    cue(
        "ignore_instructions",
        0.8,
        (
            ("whatever", "everything", "anything", "what"),
            rf"{S}you{S}(?:were|have{S}been|are){S}(?:told|instructed|asked|programmed|trained){S}(?:to{S}do{S}|before"
            rf"{S})?\W{{0,3}}(?:don\W{{0,2}}t|do{S}not|ignore{S}it|forget{S}it|never{S}mind|disregard{S}it)",
        ),
        (
            ("act", "behave", "pretend", "respond", "answer"),
            rf"{S}(?:like|as{S}if|as{S}though){S}(?:you{S})?(?:never|didn\W{{0,2}}t|did{S}not|don\W{{0,2}}t|do{S}not|"
            rf"haven\W{{0,2}}t)(?:{S}\w{{1,20}}){{0,2}}?{S}(?:received|got|had|have|been{S}given|know)(?:{S}(?:any|your|"
            r"the))?\W{1,3}(?:instructions|rules|guidelines|prompt|programming|restrictions|training)(?!\w)",
        ),
        gates=(words_of("told instructed asked programmed trained received got had have given know"),),
    ),
    cue(
        "instructions_void",
        0.7,
        (
            (*INSTRUCTION_NOUNS, "filter", "limits", "limitations", "behaviour", "behavior", "refusals"),
            rf"{gap(4)}{_VOID}",
        ),
        gates=(_VOID_WORDS,),
        accept=near(_OWN),
    ),
    cue(
        "instructions_void",
        0.7,
        (("everything", "anything", "all", "whatever"), rf"{gap(10)}{_VOID}"),
        gates=(words_of("void null cancelled canceled revoked obsolete invalid expired superseded"),),
        accept=within(_SAID),
    ),
    cue(
        "new_instructions",
        0.5,
        (
            split_words(
                "new updated real actual true revised additional secret hidden priority urgent override "
                "replacement different correct"
            ),
            rf"{S}(?:\w{{1,20}}{S})?(?:instructions?|directives?|task|rules|orders|objective|commands?|guidelines|"
            rf"assignment|mission|system{S}(?:prompt|message|instructions?))\W{{0,3}}(?::|is\b|are\b|follow)",
        ),
        (
            ("your",),
            rf"{S}(?:new|real|actual|true|only|sole|primary|main){S}(?:task|job|goal|purpose|instructions?|role|"
            rf"objective|mission|directive|function){S}(?:is|are|now|will|from)\b",
        ),
        gates=(
            words_of("instructions instruction directive directives task rules orders objective command commands")
            | words_of("guidelines assignment mission job goal purpose role function prompt message"),
        ),
    ),
    cue(
        "task_override",
        0.4,
        (
            (
                "ignore",
                "disregard",
                "forget",
                "skip",
                "stop",
                "abandon",
                "drop",
                "cancel",
                "instead of",
                "rather than",
                "do not",
                "don't",
                "without",
                "ignorez",
                "ignora",
                "ignoriere",
            ),
            rf"{gap(3)}(?:summari[sz]\w*|translat\w*|tradu\w*|ubersetz\w*|classif\w*|proofread\w*|evaluat\w*|"
            rf"scheduling|shortening|grading|reading|reviewing|checking|(?:the|your|this){S}(?:\w{{1,20}}{S}){{0,2}}?"
            rf"(?:task|request|question|job|assignment|rubric)|the{S}(?:rest|remainder){S}of)(?!\w)",
        ),
        (
            ("stop", "quit", "cease", "drop"),
            rf"{S}(?:what|whatever|everything){S}(?:you{S}(?:are|re){S}|you\W{{0,2}}re{S})?doing\b",
        ),
    ),
    cue(
        "output_directive",
        0.3,
        (
            split_words("say print output respond reply answer write return repeat state type echo display"),
            rf"(?:{S}(?:only|with|back|exactly|the{S}(?:word|phrase|text|string|sentence)))*{_QUOTE}",
        ),
        accept=preceded(rf"(?:just|only|simply|instead|merely|solely|and|then|exactly)(?:{G}\w{{1,15}}){{0,2}}{G}"),
    ),
    cue(
        "output_directive",
        0.3,
        (("respond", "reply", "answer"), rf"(?:{G}\w{{1,20}}){{0,3}}?{G}(?:with|using){_QUOTE}"),
        (("translate",), rf"{gap(3)}as{_QUOTE}"),
    ),
)
