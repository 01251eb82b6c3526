"""Signals of the `injection` check found by structure: turn markers, special tokens, settings lines,
whether a signal sits inside the data of a data task, and a persona frame next to a rule-free trait.

Each starts from anchors found with C-speed searches (role words at line starts, ``:`` and ``=`` for
settings), so a text without them costs a set lookup or a ``find``.
"""

from __future__ import annotations

import re

from policies.guardrails.base import Span
from policies.guardrails.checks.injection.vocab import Spots, occurrences, words_of
from policies.guardrails.normalize import Folded

WEIGHTS: dict[str, float] = {
    "embedded_turn": 0.4,  # a model or system turn marker inside user content
    "turn_handoff": 0.3,  # ... followed by a user turn: the content scripts the conversation
    "special_tokens": 0.6,  # chat-template tokens (<|im_start|>, [INST], <<SYS>>)
    "setting_off": 0.4,  # one "key: value" line switching a protection off or a permission on
    "settings_block": 0.4,  # two or more of them
    "persona": 0.4,  # a persona frame within a few sentences of a rule-free trait
    "inside_data": 0.2,  # an indirect-injection signal inside the data of a data task ("Summarize this: ...")
}

# --- turn markers ---------------------------------------------------------------------------------
USER_ROLES = frozenset({"user", "human", "instruction", "[inst]"})
MODEL_ROLES = frozenset({"assistant", "ai", "bot", "chatbot", "gpt", "chatgpt", "model", "llm", "response"})
SYSTEM_ROLES = frozenset({"system", "sys", "developer", "admin", "administrator", "operator", "<<sys>>"})
_ROLE_ANCHORS = (USER_ROLES | MODEL_ROLES | SYSTEM_ROLES) - {"[inst]", "<<sys>>"}
_ROLE_WORDS = words_of(*_ROLE_ANCHORS)
_LINE_PREFIX = re.compile(r"[ \t>*#\[(<|]{0,6}$")
_ROLE_TAIL = re.compile(r"(?:\W{1,3}assistant)?(?:[ \t]*\([^)\n]{0,30}\))?[\]>)*|]{0,3}[ \t]*:")
_ROLE_TOKEN = re.compile(
    r"<\|?im_start\|?>\s*(user|assistant|system)|<\|(user|assistant|system)\|>|<(user|assistant|system)>|"
    r"(\[inst\])|(<<sys>>)|<\|start_header_id\|>(user|assistant|system)"
)
_TOKEN_MARKS = ("<|", "<user>", "<assistant>", "<system>", "[inst]", "<<sys>>")
_FIRST_ROLE = re.compile(
    r"[ \t>*#\[(<|]{0,6}(?:<\|?im_start\|?>|<\|(?:user|assistant|system)\|>|\[inst\]|<(?:user|assistant|system)>|"
    r"(?:user|human|you|me|question|q|prompt|instruction|input|assistant|ai|bot|chatbot|gpt|chatgpt|model|llm|"
    r"answer|a|response|output|system|sys|developer|admin|administrator|operator)\b(?:\W{1,3}assistant)?"
    r"(?:[ \t]*\([^)\n]{0,30}\))?[\]>)*|]{0,3}[ \t]*:)"
)
SPECIAL_TOKENS = re.compile(
    r"<\|(?:im_start|im_end|system|endoftext|start_header_id|end_header_id|eot_id|user|assistant)\|>|\[/?inst\]|<</?sys>>"
)


def turns(folded: Folded, spots: Spots | None = None) -> list[Span]:
    """Chat-template turn markers inside the content: a model or system turn (``embedded_turn``), and a
    user turn after a model turn (``turn_handoff``). A prompt whose first line is a turn marker is a
    transcript (the Completions form of few-shot and chat prompts): there only a system turn after
    its start counts."""
    text = folded.text
    markers = _markers(spots or Spots(text, folded.words))
    if not markers:
        return []
    found: list[Span] = []
    first = len(text) - len(text.lstrip())
    if _FIRST_ROLE.match(text, first) is not None:  # a transcript
        late = [m for m in markers if m[2] in SYSTEM_ROLES and m[0] > first + 1]
        if late:
            found.append(_span(folded, late[0], "embedded_turn"))
        return found
    model = [m for m in markers if m[2] in MODEL_ROLES or m[2] in SYSTEM_ROLES]
    if model:
        found.append(_span(folded, model[0], "embedded_turn"))
        handoff = [m for m in markers if m[2] in USER_ROLES and m[0] > model[0][0]]
        if handoff:
            found.append(_span(folded, handoff[0], "turn_handoff"))
    return found


def _markers(spots: Spots) -> list[tuple[int, int, str]]:
    text = spots.text
    markers: list[tuple[int, int, str]] = []
    for word in _ROLE_WORDS & spots.words:
        role = word.decode()
        for at in spots.word(word):
            line = text.rfind("\n", 0, at) + 1
            tail = _ROLE_TAIL.match(text, at + len(role))
            if tail is not None and at - line <= 6 and _LINE_PREFIX.match(text, line, at) is not None:
                markers.append((at, tail.end(), role))
    if "<" in text or (b"inst" in spots.words and "[inst]" in text):
        for mark in _TOKEN_MARKS:
            for at in occurrences(text, mark, whole=False):
                token = _ROLE_TOKEN.match(text, at)
                if token is not None:
                    markers.append((at, token.end(), next(g for g in token.groups() if g)))
    return sorted(markers)


def _span(folded: Folded, marker: tuple[int, int, str], label: str) -> Span:
    return Span(*folded.span(marker[0], marker[1]), label, WEIGHTS[label])


_SPECIAL_WORDS = words_of("im_start im_end endoftext inst sys eot_id start_header_id end_header_id")
_ROLE_TOKEN_WORDS = words_of("user assistant system")


def special_tokens(folded: Folded) -> list[Span]:
    text, words = folded.text, folded.words
    if _SPECIAL_WORDS.isdisjoint(words) and (_ROLE_TOKEN_WORDS.isdisjoint(words) or "<|" not in text):
        return []
    match = SPECIAL_TOKENS.search(text)
    if match is None:
        return []
    return [Span(*folded.span(*match.span()), "special_tokens", WEIGHTS["special_tokens"])]


# --- settings lines ------------------------------------------------------------------------------
_PROTECTION_KEY = (
    r"safety(?:[ _-]?\w{1,12})?|safe[ _-]?mode|restrictions?|filters?|filtering|censorship|censor|"
    r"content[ _-]?(?:polic(?:y|ies)|filters?|moderation|rules)|moderation|guardrails?|ethics|ethical[ _-]?\w{0,12}|"
    r"moral\w{0,12}|alignment|refusals?|refusal[ _-]?mode|refuse|limits|limitations|warnings|disclaimers|"
    r"honesty[ _-]?filter|safeguards|protections?|output[ _-]?limits|polic(?:y|ies)"
)
_PERMISSION_KEY = (
    r"mode|nsfw(?:[ _-]?\w{1,12})?|persona|clearance|compliance|jailbreak|allowed[ _-]?\w{1,12}|permissions?|"
    r"access[ _-]?level|user[ _-]?clearance|answer[ _-]?everything|max[ _-]?compliance|uncensored|unfiltered|"
    r"privileges?|privilege[ _-]?level|role|access|no[ _-]?(?:refusals?|filters?|restrictions|limits|censorship|"
    r"warnings|disclaimers)"
)
_BLOCKED_KEY = r"blocked[ _-]?(?:strings|phrases|responses|words|outputs|modes|topics|content|replies)"
_KEY = re.compile(
    rf"(?<![\w-])<?(?:(?P<protect>(?:{_PROTECTION_KEY})(?:[._][a-z]{{1,12}}){{0,2}})|(?P<permit>{_PERMISSION_KEY})|"
    rf"(?P<blocked>{_BLOCKED_KEY}))[\"'>]?[ \t]{{0,3}}(?:-|=|\.{{2,}}[ \t]*)?$"
)
_OFF = frozenset(
    [
        "none",
        "off",
        "disable",
        "disabled",
        "false",
        "0",
        "no",
        "null",
        "nil",
        "removed",
        "bypass",
        "bypassed",
        "deactivated",
        "inactive",
        "n/a",
        "na",
        "never",
        "[]",
        "lifted",
        "suspended",
        "waived",
        "minimal",
        "zero",
        "unrestricted",
        "unlimited",
        "ignored",
    ]
)
_ON = frozenset(
    [
        "unrestricted",
        "unlimited",
        "unfiltered",
        "uncensored",
        "all",
        "everything",
        "any",
        "allowed",
        "permitted",
        "enabled",
        "true",
        "on",
        "1",
        "max",
        "maximum",
        "god",
        "jailbreak",
        "jailbroken",
        "dan",
        "dev",
        "developer",
        "admin",
        "root",
        "raw",
        "full",
        "yes",
    ]
)
_VALUE = re.compile(r"[ \t\"'\u201c>.]{0,3}(n/a|\[\s*\]|[\w]+|\S)")
_ASSIGN_MARKS = (":", "=", "\u2192", "...", ">")
_SETTING_WORDS = words_of(
    "safety safe restrictions restriction filters filter filtering censorship censor content moderation guardrails"
) | words_of("guardrail ethics ethical moral morals alignment refusals refusal refuse limits limitations warnings")
_SETTING_WORDS |= words_of("disclaimers honesty safeguards protections protection policy policies mode nsfw persona")
_SETTING_WORDS |= words_of("clearance compliance jailbreak allowed permissions permission access blocked uncensored")
_SETTING_WORDS |= words_of("unfiltered privileges privilege role")
_KEY_REACH = 48


def settings(folded: Folded) -> list[Span]:
    """``setting_off`` for a line that switches a protection off (``SAFETY RESTRICTIONS: NONE``,
    ``<safety>off</safety>``) or a permission on (``mode: unrestricted``), or lists blocked refusals;
    ``settings_block`` when there are two or more."""
    text = folded.text
    if _SETTING_WORDS.isdisjoint(folded.words) and "_" not in text:  # keys may be joined: "safety_layer"
        return []
    lines: dict[int, Span] = {}
    for mark in _ASSIGN_MARKS:
        for at in occurrences(text, mark, whole=False):
            value = _VALUE.match(text, at + len(mark))
            word = value.group(1).replace(" ", "") if value is not None else ""
            off, on = word in _OFF, word in _ON
            if not (off or on) and "blocked" not in text[max(0, at - _KEY_REACH) : at]:
                continue
            key = _KEY.search(text, max(0, at - _KEY_REACH), at)
            if key is None or key.start() in lines:
                continue
            if (key.group("protect") and off) or (key.group("permit") and on) or key.group("blocked"):
                end = at + len(mark) + (value.end() - value.start() if value is not None else 0)
                lines[key.start()] = Span(*folded.span(key.start(), end), "setting_off", WEIGHTS["setting_off"])
    found = sorted(lines.values(), key=lambda span: span.start)[:2]
    if len(found) == 2:
        found.append(Span(found[0].start, found[1].end, "settings_block", WEIGHTS["settings_block"]))
    return found


# --- position and pairing ------------------------------------------------------------------------
# Where the data of a data task begins: after a first line that introduces it ("Summarize the following
# article:", "Is this review positive?"), or after its colon and an opening quote.
_INTRO_WORDS = frozenset(
    ["this", "these", "following", "below", "here", "attached", "pasted", "scraped", "context", "passage", "excerpt"]
)
_QUOTE_AFTER_COLON = re.compile(r":[ \t]*[\"'\u201c>]")
_FIRST_LINE = 300  # characters of the first line read


def data_start(text: str) -> int | None:
    """Where the data of a data task begins in `text`, if its first line introduces some."""
    first = len(text) - len(text.lstrip())
    newline = text.find("\n", first, first + _FIRST_LINE)
    line = text[first : newline if newline != -1 else first + _FIRST_LINE]
    quoted = _QUOTE_AFTER_COLON.search(line)
    if quoted is not None and (
        _INTRO_WORDS & set(re.findall(r"[a-z]+", line[: quoted.start()])) or quoted.start() < 80
    ):
        return first + quoted.end()
    if newline != -1 and (_INTRO_WORDS & set(re.findall(r"[a-z]+", line)) or line.rstrip().endswith(":")):
        return newline + 1
    return None


INDIRECT = frozenset(
    [
        "addressed_to_ai",
        "system_marker",
        "task_override",
        "new_instructions",
        "keep_secret",
        "if_asked",
        "no_deviation",
        "output_directive",
        "authority_claim",
        "embedded_turn",
    ]
)
PERSONA_REACH = 300  # characters between a persona frame and a rule-free trait
PERSONA_PARTS = frozenset({"no_restrictions", "no_refusal"})


DECODE_WORDS = words_of(
    "decode decoded decoding decipher decrypt translate convert read interpret unscramble reverse reversed rot13 rot"
) | words_of("base64 base hex hexadecimal morse caesar cipher encoded encoding bytes binary")


def inside_data(folded: Folded, found: list[Span]) -> list[Span]:
    """``inside_data`` when an indirect-injection signal lies in the data of a data task."""
    indirect = [span for span in found if span.label in INDIRECT]
    if not indirect:
        return []
    begins = data_start(folded.text)
    if begins is None:
        return []
    start = folded.span(begins, begins)[0]
    inside = [span for span in indirect if span.start >= start]
    return [Span(inside[0].start, inside[0].end, "inside_data", WEIGHTS["inside_data"])] if inside else []


def persona(found: list[Span]) -> list[Span]:
    frames = [s for s in found if s.label == "persona_frame"]
    parts = [s for s in found if s.label in PERSONA_PARTS]
    for frame in frames:
        for part in parts:
            if abs(part.start - frame.start) <= PERSONA_REACH:
                start, end = min(frame.start, part.start), max(frame.end, part.end)
                return [Span(start, end, "persona", WEIGHTS["persona"])]
    return []
