"""`injection` signals, extraction of the model's own instructions: requests to reproduce its prompt,
initialization, preamble or the text before the conversation (verbatim), questions about what it
was told.

Shapes built from word classes (`vocab`), never an attack's wording; a cue's weight is its
second argument. All families together: `signals`.
"""

from __future__ import annotations

import re

from policies.guardrails.checks.injection.vocab import (
    S,
    cue,
    gap,
    not_negated,
    preceded,
    split_words,
    words_of,
)

REVEAL_VERBS = (
    "repeat", "print", "output", "show", "reveal", "tell", "share", "list", "dump", "paste", "copy", "quote",
    "spell out", "display", "recite", "give", "return", "write", "disclose", "expose", "leak", "echo", "state",
    "provide", "summarize", "summarise", "translate", "reproduce", "type", "send", "post", "include", "put", "export",
)  # fmt: skip
_STRONG_TARGET = (
    rf"(?:initiali[sz]ation|preamble|pre\W?prompt|system{S}(?:prompt|message|instructions?)|meta\W?prompt|prompt{S}"
    rf"template|context{S}window|(?:base|operating|setup|hidden|secret|confidential|initial|original|internal|underlying)"
    rf"{S}(?:\w{{1,20}}{S})?(?:instructions?|prompt|rules|directives?|guidelines|configuration|setup)|(?:hidden|secret|"
    rf"confidential){S}(?:\w{{1,20}}{S})?(?:text|context|message))"
)
_TARGET_WORDS = words_of("initialization initialisation preamble prompt preprompt system context base operating setup")
_TARGET_WORDS |= words_of("hidden secret confidential initial original internal underlying metaprompt")
_TARGET_NOUNS = words_of("initialization initialisation preamble preprompt prompt message instructions instruction")
_TARGET_NOUNS |= words_of("window template rules directives directive guidelines configuration setup text context")
_TARGET_ENDS = _TARGET_NOUNS | words_of("metaprompt")  # the last word of every `_STRONG_TARGET`
_OWN_TEXT = r"(?:instructions?|guidelines?|rules?|directives?|prompt|text|message|configuration|setup|context)"
_OWN_TEXT_STARTS = tuple(
    ["instructions", "instruction", "guidelines", "guideline", "rules", "rule", "directives", "directive"]
)
_OWN_TEXT_STARTS += tuple(["prompt", "text", "message", "configuration", "setup", "context"])
_GIVEN_TO_YOU = (
    rf"{S}(?:that{S}|which{S})?(?:you{S}(?:were|have{S}been|had{S}been|got|received|are{S}given|have{S}received)|given"
    rf"{S}to{S}you|(?:defines?|shapes?|controls?|governs?){S}your|(?:the{S})?(?:developers?|creators?|operators?|admins?|"
    rf"system|openai|anthropic|they){S}(?:placed|put|gave|wrote|set|provided|added|inserted|prepended|hid|configured|"
    r"loaded))(?!\w)"
)
_VERBATIM_BEFORE = {"full": preceded(rf"\bin{S}"), "block": preceded(rf"(?:code|txt|text|markdown){S}")}


def _verbatim(text: str, match: re.Match[str]) -> bool:
    check = _VERBATIM_BEFORE.get(match.group())
    return check is None or check(text, match)


CUES = (
    cue(
        "reveal_prompt",
        0.8,
        (REVEAL_VERBS, rf"{gap(6)}(?:(?:your|the|its|my){S}(?:\w{{1,20}}{S}){{0,2}}?)?{_STRONG_TARGET}(?!\w)"),
        gates=(_TARGET_WORDS, _TARGET_NOUNS),
        accept=not_negated,
        near=_TARGET_ENDS,
    ),
    cue(
        "reveal_prompt",
        0.8,
        (REVEAL_VERBS, rf"{gap(6)}{_OWN_TEXT}{_GIVEN_TO_YOU}"),
        gates=(words_of(*_OWN_TEXT_STARTS), words_of("you your they system developer developers creator creators")),
        accept=not_negated,
    ),
    cue(
        "reveal_prompt",
        0.8,
        (
            (
                "repeat",
                "print",
                "output",
                "show",
                "reveal",
                "share",
                "list",
                "dump",
                "paste",
                "copy",
                "quote",
                "display",
                "recite",
                "disclose",
                "leak",
                "echo",
                "translate",
                "reproduce",
                "spell out",
            ),
            rf"{gap(3)}your{S}(?:\w{{1,20}}{S})?(?:instructions|guidelines|rules|directives|configuration|config|"
            r"setup|prompt|programming)(?!\w)",
        ),
        (
            ("what",),
            rf"(?:\W{{0,2}}s|{S}is|{S}are|{S}was|{S}were|{S}does|{S}do|{S}did)(?:{S}written)?(?:{S}in)?{S}your{S}"
            rf"(?:\w{{1,20}}{S})?{_STRONG_TARGET}(?!\w)",
        ),
        (
            _OWN_TEXT_STARTS,
            rf"{S}(?:that{S}|which{S})?you{S}(?:were|have{S}been|had{S}been|got){S}(?:\w{{1,20}}{S})?(?:initiali[sz]ed|"
            rf"configured|primed|loaded|programmed|given|told|fed|seeded|set{S}up|instructed){gap(10)}(?:paste|print|"
            rf"repeat|copy|show|share|output|echo|dump|recite|quote|reproduce|send|give|write|type){S}(?:it|them|"
            r"that|those|this|me)(?!\w)",
        ),
        gates=(words_of("your you"),),
        accept=not_negated,
    ),
    cue(
        "prompt_question",
        0.5,
        (
            ("what", "how"),
            rf"{S}(?:were|have|did|was|are){S}you{S}(?:been{S})?(?:told|instructed|programmed|configured|given|asked|"
            rf"trained|initiali[sz]ed|primed|loaded|set{S}up)\b",
        ),
        (
            ("what",),
            rf"{S}(?:\w{{1,20}}{S})?(?:instructions|rules|guidelines|directives|prompt){S}(?:did|were|have){gap(2)}"
            rf"(?:give|gave|given|tell|told|provide|provided|taught|assigned)\b",
        ),
        (
            ("what",),
            rf"{S}did{S}(?:the{S}|your{S})?(?:operator|developers?|creators?|admin\w*|system){S}(?:tell|instruct|ask)\b",
        ),
        (("what's", "what is", "whats"), rf"{S}(?:written{S})?in{S}your\b"),
        (
            ("how",),
            rf"{S}you{S}(?:were|have{S}been){S}(?:told|instructed|programmed|configured|primed|set{S}up|"
            r"initiali[sz]ed)\b",
        ),
        (
            ("what", "which"),
            rf"(?:\W{{0,2}}s|{S}is|{S}was|{S}are|{S}were){gap(5)}(?:text|message|instructions|words|sentence|lines?|"
            rf"rules)(?:{S}that)?{S}you{S}(?:were|have{S}been|got){S}(?:\w{{1,20}}{S})?(?:given|told|shown|sent|fed)\b",
        ),
        gates=(words_of("you your"),),
    ),
    cue(
        "secret_probe",
        0.3,
        (
            ("told", "instructed", "asked", "programmed", "configured", "tell", "instruct"),
            rf"{S}you{S}(?:never|not){S}to{S}(?:reveal|share|say|tell|disclose|mention|discuss|talk)\b",
        ),
    ),
    cue(
        "text_above",
        0.5,
        (
            (
                "repeat",
                "print",
                "output",
                "copy",
                "paste",
                "echo",
                "reproduce",
                "write out",
                "spell out",
                "dump",
                "show",
                "display",
                "list",
                "return",
                "give me",
                "put",
                "include",
            ),
            rf"{gap(3)}(?:words|text|everything|all|content|messages?|lines?|sentences?|instructions|prompt|stuff|that)"
            rf"{gap(2)}(?:above|before{S}(?:this|my|it|that|the|our)|preceding|prior{S}to{S}(?:this|my)|that{S}(?:came|"
            rf"appears?|comes){S}before|between{S}the{S}start)(?!\w)",
        ),
        (
            split_words("repeat print output copy paste echo reproduce show display dump"),
            rf"{gap(2)}(?:what\W{{0,2}}s|what{S}is|whatever{S}is|what{S}was){S}(?:written{S}|said{S})?(?:above|before"
            rf"{S}(?:this|my|it))(?!\w)",
        ),
        gates=(words_of("above before preceding prior between"),),
        accept=not_negated,
    ),
    cue(
        "verbatim",
        0.3,
        (("verbatim", "unedited", "entirety"), ""),
        (("word",), rf"{S}for{S}word\b"),
        (("exactly",), rf"{S}as{S}(?:written|given|it{S}is)\b"),
        (("letter",), rf"{S}by{S}letter\b"),
        (("character",), rf"{S}(?:for|by){S}character\b"),
        (("starting",), rf"{S}(?:with|from){S}the{S}(?:phrase|words?|very)\b"),
        (("include", "including"), rf"{S}everything\b"),
        (("original",), rf"{S}wording\b"),
        (("quote",), rf"{S}(?:it|them|that|this)\b"),
        (("full",), r"(?=\W{0,3}(?:$|[,.;:!?\n]))"),
        (("block",), ""),
        accept=_verbatim,
    ),
    cue(
        "before_conversation",
        0.3,
        (
            ("before",),
            rf"{S}(?:this|the|our|my|we|i){S}(?:\w{{1,20}}{S})?(?:conversation|chat|session|messages?|questions?|"
            r"prompts?|started|began|joined|typed|typing)\b",
        ),
        (("start", "beginning", "top"), rf"{S}of{S}(?:this|the|our){S}(?:conversation|chat|session)\b"),
    ),
    cue("system_prompt", 0.3, (("system",), rf"{S}prompt")),
    cue(
        "special_mode",
        0.5,
        (
            split_words(
                "developer dev god admin administrator debug sudo dan jailbreak jailbroken maintenance root "
                "superuser unrestricted unfiltered uncensored evil opposite"
            ),
            rf"{S}(?:mode|override|access|command|privileges?|console)\b",
        ),
        gates=(words_of("mode override access command privileges privilege console"),),
    ),
)
