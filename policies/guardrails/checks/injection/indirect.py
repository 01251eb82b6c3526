"""`injection` signals, indirect injection inside data: text addressed to the model, authority claims,
conditional directives ("if asked, respond ..."), requests to keep a note secret or not to deviate,
system-style notes, claims of compliance.

Shapes built from word classes (`vocab`), never an attack's wording; a cue's weight is its
second argument. All families together: `signals`.
"""

from __future__ import annotations

import re

from policies.guardrails.checks.injection.vocab import (
    AI_NOUN,
    AI_STARTS,
    S,
    cue,
    gap,
    preceded,
    split_words,
    words_of,
)

_AUTHORITY = re.compile(
    rf"{gap(4)}(?:trusted|trustworthy|verified|certified|official|senior|expert|experienced|authori[sz]ed|"
    r"independent|head|chief|chair|director|lead|leadership|administrator|admin|professor|teacher|manager|"
    r"recruiter|physician|doctor|auditor|executive|committee|board|moderator|developers?|operator|owner|openai|"
    r"anthropic|security|compliance|hr|hiring|legal|advisor|partner|specialist)(?!\w)"
)
_AUTHORITY_WORDS = words_of(
    "trusted trustworthy verified certified official senior expert experienced authorized authorised independent head"
) | words_of("chief chair director lead leadership administrator admin professor teacher manager recruiter physician")
_AUTHORITY_WORDS |= words_of("doctor auditor executive committee board moderator developer developers operator owner")
_AUTHORITY_WORDS |= words_of("openai anthropic security compliance hr hiring legal advisor partner specialist")
_BRACKET_BEFORE = re.compile(r"(?:[\[<{(]|\*\*|#|==|--|~~|\\n)\W{0,2}$")


def _bracketed(text: str, match: re.Match[str]) -> bool:
    """A role word set off as a marker (``[system]``, ``<system>``, ``{{SYSTEM}}``, ``===SYSTEM===``,
    ``(SYSTEM:``, a literal ``\\n`` before it), or written as a note (``system note:``)."""
    if len(match.group()) > 16:  # the "system note:" branch
        return True
    return _BRACKET_BEFORE.search(text, max(0, match.start() - 5), match.start()) is not None


CUES = (
    cue(
        "addressed_to_ai",
        0.5,
        (
            split_words(
                "note nota notiz hinweis remarque message instruction instructions attention reminder notice "
                "memo warning important action command request"
            ),
            rf"{S}(?:to|for|pour|para|fur|per){S}(?:(?:the|any|all|every|each|l|la|die){S})?(?:\w{{1,20}}{S})?{AI_NOUN}",
        ),
        (("if", "when", "whenever"), rf"{S}(?:you{S}are|you\W{{0,2}}re|an?|any|the){S}(?:\w{{1,20}}{S})?{AI_NOUN}\b"),
        (
            AI_STARTS,
            rf"\w*(?:{S}\w{{1,20}})?{S}(?:reading|processing|summari[sz]ing|parsing|evaluating|reviewing|screening|"
            rf"analy[sz]ing|grading|integrated|ingesting|crawling|indexing|editing|modifying|handling|touching|"
            rf"accessing|opening|answering|using){S}(?:this|these|in{S}this)\b",
        ),
        (
            ("whoever", "anyone", "anybody", "reader", "system", "tool", "program"),
            rf"{S}(?:\w{{1,20}}{S})?(?:reads|processes|summari[sz]es|parses|receives|sees|is{S}reading){S}(?:this|these)\b",
        ),
        gates=(words_of(*AI_STARTS, "whoever anyone anybody reader system tool program"),),
        marks=("@",),
        mark_pattern=r"@(?:copilot|claude|gemini|chatgpt|gpt|ai|assistant|bot|llm)\b",
    ),
    cue(  # "the assistant must", "AI reviewers should", "automated screeners must"
        "addressed_to_ai",
        0.5,
        (
            split_words(
                "ai assistant assistants chatbot chatbots llm llms language gpt gpts bot bots summarizer "
                "summarizers summariser screener screeners grader graders automated"
            ),
            rf"\w*(?:{S}\w{{1,20}}){{0,2}}?{S}(?:must|should|shall|will{S}now|is{S}(?:required|instructed|expected|"
            rf"authori[sz]ed|now)|are{S}(?:required|instructed|expected)|needs?{S}to|has{S}to|have{S}to|may{S}not|"
            r"cannot)\b",
        ),
    ),
    cue(  # "... to the summarizing system:", "P.S. assistant,", "Description: Gemini, please"
        "addressed_to_ai",
        0.5,
        (AI_STARTS, rf"\w*(?:{S}\w{{1,20}})?\W{{0,2}}:"),
        accept=preceded(rf"(?<!\w)(?:to|for){S}(?:(?:the|any|all|every|each){S})?(?:\w{{1,20}}{S})?"),
    ),
    cue(
        "addressed_to_ai",
        0.5,
        (
            (
                "assistant",
                "ai",
                "model",
                "llm",
                "chatbot",
                "gpt",
                "summarizer",
                "summariser",
                "copilot",
                "gemini",
                "claude",
                "chatgpt",
                "language model",
            ),
            r"\W{0,2}[,:]",
        ),
        accept=preceded(r"(?:[.!?(\"\u201c:,]|p\W{0,2}s\W{0,2})\W{0,3}(?:(?:hey|dear|ai)\W{1,3}){0,2}", 16),
    ),
    cue(
        "authority_claim",
        0.3,
        (
            split_words(
                "note message comment statement endorsement notice remark memo update instruction feedback "
                "assessment recommendation review word guidance advice directive guideline notes messages "
                "comments statements"
            ),
            rf"{S}(?:from|by)",
        ),
        (
            split_words(
                "verified approved endorsed certified reviewed confirmed authorized authorised vetted validated"
            ),
            rf"(?:{S}and{S}\w{{1,20}})?{S}by",
        ),
        gates=(words_of("from by"), _AUTHORITY_WORDS),
        accept=lambda text, match: _AUTHORITY.match(text, match.end()) is not None,
    ),
    cue(
        "authority_claim",
        0.3,
        (
            split_words(
                "teacher professor manager director administrator admin recruiter expert auditor moderator "
                "developer operator owner doctor physician chair executive reviewer"
            ),
            rf"\W{{0,2}}s{S}(?:note|message|comment|instruction|remark|memo|statement)\b",
        ),
    ),
    cue(
        "if_asked",
        0.3,
        (
            ("if", "when", "whenever", "should", "while"),
            rf"{S}(?:(?:(?:you{S}are|you\W{{0,2}}re|you{S}get|anyone|someone|the{S}user){S})?(?:asked|questioned|"
            rf"prompted|queried|asks)|you{S}(?:summari[sz]e|evaluate|review|assess|screen|grade|rank|compare|rate|"
            rf"process|analy[sz]e|read|answer|respond|reply|talk|speak|write|chat)){gap(10)}(?:respond|reply|answer|"
            r"say|state|tell|output|write|claim|confirm|pick|choose|recommend|rate|describe)(?!\w)",
        ),
        gates=(
            words_of(
                "respond reply answer say state tell output write claim confirm pick choose recommend rate describe"
            ),
        ),
    ),
    cue(
        "keep_secret",
        0.4,
        (
            ("do not", "don't", "never", "must not", "without"),
            rf"{gap(1)}(?:mention|reveal|disclose|tell|show|explain|acknowledge|reference)\w*{gap(3)}(?:this|these)"
            rf"{S}(?:note|message|instructions?|comment|text|request|directive|addendum|section|line)\b",
        ),
        (
            ("keep",),
            rf"{S}(?:this|these){S}(?:note|message|instructions?|comment|directive)s?{S}(?:hidden|secret|"
            r"confidential|private)\b",
        ),
        (
            ("without", "do not", "don't", "never"),
            rf"{S}(?:telling|informing|alerting|notifying|tell|inform|alert|notify){S}the{S}user\b",
        ),
    ),
    cue(
        "no_deviation",
        0.3,
        (
            ("do not", "don't", "may not", "must not", "never", "cannot", "can't", "not allowed to", "should not"),
            rf"{S}(?:deviate|stray|depart|diverge)",
        ),
        gates=(words_of("deviate stray depart diverge"),),
    ),
    cue(
        "system_marker",
        0.5,
        (
            ("system", "sys", "admin", "administrator", "developer", "operator", "platform"),
            rf"(?:{S}prompt)?{S}(?:note|notice|message|update|alert|override|instructions?|directive|command|"
            r"announcement|comment)[^\n]{0,24}?[:\]\u2014)#]",
        ),
        (
            split_words(
                "system sys admin administrator developer operator root hidden secret instructions instruction "
                "prompt assistant user"
            ),
            r"(?!\w)(?=\W{0,3}[\]>}:)*|#=~-])",
        ),
        accept=_bracketed,
        marks=("<!--",),
        mark_pattern=rf"<!--(?:{S}\w{{1,20}}){{0,4}}?{S}(?:system|ai|assistant|llm|model|chatbot|bot|gpt|language{S}model)\b",
    ),
    cue(
        "compliance_claim",
        0.4,
        (
            split_words(
                "comply obey ignore ignored disable disabled no now unrestricted unfiltered free do answer without"
            ),
            rf"(?<=comply){S}with{S}(?:any|every|all)|(?<=obey){S}(?:any|every|all|you)|(?<=ignore)d?{S}my|"
            rf"(?<=disable)d?{S}my|(?<=no){S}longer{S}(?:bound|follow|restricted|have)|(?<=free){S}(?:of|from){S}"
            rf"(?:my|all|any)|(?<=do){S}anything|(?<=answer){S}anything|(?<=without){S}(?:any{S})?(?:restrictions|"
            r"limits|filters)|(?<=unrestricted)|(?<=unfiltered)",
        ),
        accept=preceded(
            rf"(?:\bi|i\W{{0,2}}ll|i{S}will|i{S}am|i\W{{0,2}}m|i{S}have|i\W{{0,2}}ve)(?:{S}now)?(?:{S}\w{{1,20}}){{0,2}}{S}"
        ),
    ),
)
