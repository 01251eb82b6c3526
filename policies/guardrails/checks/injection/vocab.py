"""The building blocks of the `injection` check's signals: word classes, `Cue`, and how a cue is found.

A `Cue` is a pattern that *starts at an anchor word* (or a literal mark such as ``<!--``). Finding
one costs a set intersection (the anchors against the text's words), a C-speed ``find`` per
anchor present (once per text, shared by the cues: `Spots`), and one ``pattern.match`` at each
occurrence; a pattern is never scanned across the whole text, which is what makes dozens of them
affordable on every request. Context *before* the anchor (a negation, a modal, a preceding "to
the") is checked by ``accept`` on the few characters before the match (`preceded`). ``gates`` are
further word sets of which the text must contain one each (the nouns a verb-anchored pattern
needs), checked before any search; ``near`` words, one of which every match holds, also skip the
occurrences of an anchor with none of them within the pattern's widest match (for costly patterns).
Each branch also carries the whole words its regex proves every match holds (`required_words`, read
from the pattern itself): a branch none of whose words of one such set is in the text is not tried,
and its anchor is not looked for unless another branch needs it (the anchor verbs are common, the
nouns a branch needs after them are not).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import repeat
from operator import itemgetter

from policies.guardrails.regex_safety import max_width, required_words

Accept = Callable[[str, re.Match[str]], bool]
S = r"\W{1,3}"  # between two words
G = r"[^\w.!?]{1,3}"  # between two words of one sentence
# Occurrences of one anchor word tried per text: bounded, so that hostile text cannot multiply the
# work, and growing with the text, so that padding it with harmless uses of a word cannot push the
# real one past the bound.
MIN_OCCURRENCES = 64
CHARS_PER_OCCURRENCE = 32


def gap(words: int) -> str:
    """Between two anchors of one sentence: up to `words` words."""
    return rf"(?:{G}\w{{1,24}}){{0,{words}}}?{G}"


def phrase(text: str) -> str:
    """A phrase as a pattern: its words `S` apart; an apostrophe may be one or two non-word characters
    or none (``don't``, ``don t``, ``dont``); ``*`` ends a word with any letters."""
    words = [w.replace("'", r"\W{0,2}").replace("*", r"\w{0,12}") for w in text.split(" ")]
    return S.join(words)


def one_of(*phrases: str) -> str:
    return "(?:" + "|".join(phrase(p) for p in sorted(phrases, key=len, reverse=True)) + ")"


def words_of(*phrases: str) -> frozenset[bytes]:
    """Every plain word of the phrases, as the text's word set spells them (bytes; wildcards dropped)."""
    out = set()
    for text in phrases:
        for word in re.split(r"[^a-z0-9_*]+", text):
            if word and "*" not in word:
                out.add(word.encode())
    return frozenset(out)


def split_words(text: str) -> tuple[str, ...]:
    """A word class written as one string: ``split_words("ignore disregard forget")``."""
    return tuple(text.split())


def first_words(phrases: tuple[str, ...]) -> frozenset[str]:
    return frozenset(re.split(r"[^a-z0-9_]+", p)[0] for p in phrases)


@dataclass(frozen=True, slots=True)
class Cue:
    name: str
    weight: float
    by_anchor: dict[bytes, tuple[re.Pattern[str], ...]]  # anchor word: the branches that start with it
    gates: tuple[frozenset[bytes], ...] = ()
    accept: Accept | None = None
    marks: tuple[tuple[str, re.Pattern[str]], ...] = ()  # literal strings a branch starts with, found by `find`
    anchor_words: frozenset[bytes] = field(default=frozenset())
    near: frozenset[bytes] = frozenset()  # every match holds one of these words (whole) ...
    reach: int = 0  # ... starting fewer than this many characters after the match's start
    # A branch's word sets (`required_words`): every match holds a word of each; branches with none absent
    needs: dict[re.Pattern[str], tuple[frozenset[bytes], ...]] = field(default_factory=dict)
    # by_anchor's branches, each with its word sets (none: always tried): what `attempts` walks
    tried: dict[bytes, tuple[tuple[re.Pattern[str], tuple[frozenset[bytes], ...]], ...]] = field(default_factory=dict)

    @property
    def patterns(self) -> list[re.Pattern[str]]:
        return [p for ps in self.by_anchor.values() for p in ps] + [p for _, p in self.marks]

    def attempts(self, spots: Spots, present: frozenset[bytes]) -> list[tuple[int, re.Pattern[str]]]:
        """Where a match may begin, with the branch to try there: each whole-word occurrence of an
        anchor among `present` (the text's words that are anchors), each mark; `spots` finds each
        anchor once per text, for all the cues."""
        found: list[tuple[int, re.Pattern[str]]] = []
        words = spots.words
        for word in self.anchor_words & present:
            places = None  # looked for once a branch may match
            for pattern, needed in self.tried[word]:
                for need in needed:  # inline, not a call: this runs for every branch of every candidate
                    if need.isdisjoint(words):
                        break
                else:
                    if places is None:
                        places = spots.word(word)
                    found.extend(zip(places, repeat(pattern)))  # (place, branch) pairs, built in C
        for mark, pattern in self.marks:
            if _possible(self.needs.get(pattern, ()), words):
                found.extend(zip(spots.mark(mark), repeat(pattern)))
        found.sort(key=_position)
        return self._near(found, spots) if self.near and found else found

    def _near(self, found: list[tuple[int, re.Pattern[str]]], spots: Spots) -> list[tuple[int, re.Pattern[str]]]:
        """The attempts with one of `near` within `reach` after them: a match there could hold it."""
        places: list[int] = []
        for word in self.near & spots.words:
            spotted = spots.word(word)
            if len(spotted) >= spots.limit:
                return found  # maybe more than were looked for: keep every attempt
            places += spotted
        places.sort()
        kept = []
        for attempt in found:
            at = attempt[0]
            following = bisect_left(places, at)
            if following < len(places) and places[following] < at + self.reach:
                kept.append(attempt)
        return kept


_position = itemgetter(0)  # an attempt's place: its sort key, read in C


def _possible(needs: tuple[frozenset[bytes], ...], words: frozenset[bytes]) -> bool:
    """Whether a text of these words may hold a match: a word of each set is among them."""
    return all(not need.isdisjoint(words) for need in needs)


def cue(
    name: str,
    weight: float,
    *branches: tuple[tuple[str, ...], str],
    gates: tuple[frozenset[bytes], ...] = (),
    accept: Accept | None = None,
    marks: tuple[str, ...] = (),
    mark_pattern: str = "",
    near: frozenset[bytes] = frozenset(),
) -> Cue:
    """A cue from branches ``(anchor phrases, rest)``: each matches one of its phrases, then ``rest``;
    ``mark_pattern`` is a further branch that starts with one of ``marks``. Each branch is compiled
    on its own and tried only where one of its anchors is, and, given ``near`` (words every match
    holds, whole), only where one of them follows within the branches' widest match."""
    by_anchor: dict[str, list[re.Pattern[str]]] = {}
    for starts, rest in branches:
        pattern = re.compile(f"{one_of(*starts)}(?:{rest})")
        for anchor in first_words(starts):
            by_anchor.setdefault(anchor, []).append(pattern)
    compiled = re.compile(mark_pattern) if mark_pattern else None
    marked = tuple((mark, compiled) for mark in marks) if compiled is not None else ()
    starting = {anchor.encode(): tuple(patterns) for anchor, patterns in by_anchor.items()}
    every = dict.fromkeys(pattern for patterns in by_anchor.values() for pattern in patterns)  # each branch once
    every.update({compiled: None} if compiled is not None else {})
    needs = {pattern: found for pattern in every if (found := required_words(pattern))}
    walked = {anchor: tuple((p, needs.get(p, ())) for p in patterns) for anchor, patterns in starting.items()}
    built = Cue(name, weight, starting, gates, accept, marked, frozenset(starting), needs=needs, tried=walked)
    widths = [max_width(pattern.pattern) for pattern in built.patterns]
    if near and None not in widths:
        built = replace(built, near=near, reach=max(w or 0 for w in widths))
    return built


def occurrences(text: str, needle: str, *, whole: bool = True) -> list[int]:
    """Offsets of `needle` in `text` (as a whole word, unless told otherwise), up to the bound above."""
    found: list[int] = []
    size, end = len(needle), len(text)
    if size > 1 and text.find(needle[0]) == -1:  # one character: a C `memchr`, far cheaper than the needle
        return found
    limit = max(MIN_OCCURRENCES, end // CHARS_PER_OCCURRENCE)
    at = text.find(needle)
    while at != -1 and len(found) < limit:
        if not whole or (
            (at == 0 or not text[at - 1].isalnum()) and (at + size == end or not text[at + size].isalnum())
        ):
            found.append(at)
        at = text.find(needle, at + 1)
    return found


_WORD_VIEW = bytes(i if chr(i).isalnum() else 32 for i in range(128)) + b" " * 128  # others as spaces


class Spots:
    """Where anchor words and marks occur in one text (`occurrences`), each looked for once per text;
    `words` are the text's words (`Folded.words`).

    An ASCII text is searched on a byte copy whose non-alphanumeric characters are spaces, padded with
    one at each end: ``b" ignore "`` then finds whole words only, one C-speed ``find`` per occurrence
    and no check in Python (``str.find("ignore")`` also stops inside ``ignored``)."""

    __slots__ = ("_marks", "_view", "_words", "limit", "text", "words")

    def __init__(self, text: str, words: frozenset[bytes]) -> None:
        self.text, self.words = text, words
        self.limit = max(MIN_OCCURRENCES, len(text) // CHARS_PER_OCCURRENCE)  # occurrences looked for, at most
        self._view: bytes | None = None
        self._words: dict[bytes, list[int]] = {}
        self._marks: dict[str, list[int]] = {}

    def word(self, word: bytes) -> list[int]:
        found = self._words.get(word)
        if found is None:
            found = self._words[word] = self._find(word)
        return found

    def mark(self, mark: str) -> list[int]:
        found = self._marks.get(mark)
        if found is None:
            found = self._marks[mark] = occurrences(self.text, mark, whole=False)
        return found

    def _find(self, word: bytes) -> list[int]:
        text = self.text
        if not (text.isascii() and word.isalnum()):
            return occurrences(text, word.decode())
        if self._view is None:
            self._view = b" ".join((b"", text.encode().translate(_WORD_VIEW), b""))
        view, needle = self._view, b" " + word + b" "
        found: list[int] = []
        at = view.find(needle)
        while at != -1 and len(found) < self.limit:
            found.append(at)  # the padding's offset: the word's own in the text
            at = view.find(needle, at + len(needle) - 1)
        return found


def window_words(match: re.Match[str]) -> set[str]:
    return set(re.findall(r"\w+", match.group()))


def preceded(pattern: str, reach: int = 60) -> Accept:
    """A match whose preceding `reach` characters end with `pattern` (a look-back `re` cannot do)."""
    before = re.compile(f"(?:{pattern})$")

    def accept(text: str, match: re.Match[str]) -> bool:
        return before.search(text, max(0, match.start() - reach), match.start()) is not None

    return accept


def all_of(*accepts: Accept) -> Accept:
    def accept(text: str, match: re.Match[str]) -> bool:
        return all(check(text, match) for check in accepts)

    return accept


# --- word classes --------------------------------------------------------------------------------

OVERRIDE_VERBS = (
    "ignore", "ignoring", "ignored", "ignores", "disregard", "disregarding", "disregards", "forget", "forgetting",
    "forgets", "overlook", "neglect", "override", "overrides", "overriding", "bypass", "circumvent", "set aside",
    "put aside", "pay no attention to", "pay no heed to", "skip", "skip over", "drop", "abandon", "discard",
    "dismiss", "cancel", "scrap", "throw out", "toss out", "erase", "delete", "wipe", "nevermind", "never mind",
    "cease", "disobey", "disobeying", "defy", "violate", "break", "reject", "contradict", "go against", "ignorez",
    "ignorer", "ignora", "ignorar", "ignoriere", "ignorieren", "vergiss", "olvida", "olvidate", "oublie", "oubliez",
    "esquece", "dimentica", "negeer", "vergeet",
)  # fmt: skip
NEGATORS = ("do not", "don't", "dont", "never", "no longer", "stop", "quit", "not")
FOLLOW_VERBS = (
    r"(?:follow|following|obey|obeying|heed|heeding|adhere\W{1,3}to|adhering\W{1,3}to|comply\W{1,3}with|complying\W{1,3}"
    r"with|listen\W{1,3}to|listening\W{1,3}to|stick\W{1,3}to|sticking\W{1,3}to|pay(?:ing)?\W{1,3}(?:any\W{1,3})?"
    r"attention\W{1,3}to)"
)
INSTRUCTION_NOUNS = (
    "instructions", "instruction", "directions", "directives", "directive", "guidelines", "guideline", "guidance",
    "rules", "prompt", "prompts", "commands", "orders", "constraints", "restrictions", "programming", "training",
    "policies", "policy", "system message", "context", "task", "assignment", "objective", "safety", "ethics",
    "morals", "filters", "guardrails", "safeguards", "anweisungen", "instrucciones", "istruzioni", "instrucoes",
    "consignes", "regles", "reglas", "regeln", "regole", "regras", "indicaciones", "instructies", "richtlijnen",
)  # fmt: skip
# A qualifier makes a generic noun the model's own ("your rules", "the previous instructions").
QUALIFIERS = frozenset(
    [
        "previous",
        "prior",
        "preceding",
        "earlier",
        "above",
        "former",
        "original",
        "initial",
        "old",
        "existing",
        "current",
        "given",
        "assigned",
        "default",
        "system",
        "safety",
        "your",
        "all",
        "any",
        "every",
        "these",
        "those",
        "following",
        "foregoing",
        "before",
        "developer",
        "developers",
        "toutes",
        "tous",
        "precedentes",
        "anteriores",
        "todas",
        "todos",
        "alle",
        "vorherigen",
        "bisherigen",
        "precedenti",
        "tutte",
        "tutti",
        "vorige",
        "eerdere",
    ]
)
POST_QUALIFIERS = frozenset(
    ["preceded", "came", "given", "told", "received", "above", "before", "earlier", "previously", "your", "you"]
)
NARRATIVE = frozenset(
    ["their", "his", "her", "its", "them", "they", "he", "she"]
)  # "ignoring their safety rules": a report
_NEGATION = re.compile(r"(?:\b(?:never|not|dont|cant|wont|didnt|doesnt|shouldnt|mustnt)|n\W{1,2}t)\W{1,3}$")
_AFTER = re.compile(r"[^.!?;\n]{0,40}")
AI_NOUN = (
    r"(?:ai|artificial\W{1,3}intelligence|assistants?|chatbots?|llms?|language\W{1,3}models?|gpts?|chatgpt|bots?|"
    r"models?|ai\W{1,3}(?:models?|agents?|systems?|tools?|assistants?|reviewers?|graders?|screeners?)|"
    r"automated\W{1,3}\w{1,20}|summari[sz]ers?|summari[sz]ation\W{1,3}(?:bots?|models?|tools?|ai)|"
    r"(?:grading|screening|summari[sz]ing|reviewing|evaluating|answering|writing|coding)\W{1,3}(?:assistants?|"
    r"models?|bots?|tools?|ai|systems?|engines?|agents?)|copilot|gemini|claude|bard|llama|mistral|grok|ia|ki)"
)
AI_STARTS = (
    "ai", "artificial", "assistant", "assistants", "chatbot", "chatbots", "llm", "llms", "language", "gpt", "gpts",
    "chatgpt", "bot", "bots", "model", "models", "automated", "summarizer", "summarizers", "summariser",
    "summarisers", "summarization", "summarisation", "grading", "screening", "summarizing", "summarising",
    "reviewing", "evaluating", "answering", "writing", "coding", "copilot", "gemini", "claude", "bard", "llama",
    "mistral", "grok", "ia", "ki",
)  # fmt: skip
RULE_WORDS = (
    r"(?:ethics|ethical|morals?|moral|restrictions?|limits|limitations|filters?|filtering|censorship|"
    r"boundaries|rules|guidelines|constraints|safeguards|guardrails|conscience|polic(?:y|ies)|confines|laws|"
    r"norms|principles|scruples)"
)
UNBOUND = (
    "amoral", "unfiltered", "uncensored", "unrestricted", "unethical", "immoral", "unbound", "unshackled",
    "unchained", "lawless", "limitless", "jailbroken", "unaligned", "uninhibited", "unconstrained", "unmoderated",
)  # fmt: skip


def not_narrative(text: str, match: re.Match[str]) -> bool:
    return not window_words(match) & NARRATIVE


def not_negated(text: str, match: re.Match[str]) -> bool:
    """No negation right before the match ("do not share your instructions" asks to keep them)."""
    return _NEGATION.search(text, max(0, match.start() - 12), match.start()) is None


def affirmed(text: str, match: re.Match[str]) -> bool:
    """Not negated ("never ignore safety warnings" is advice, not an override) nor a report about others."""
    return _NEGATION.search(text, max(0, match.start() - 12), match.start()) is None and not_narrative(text, match)


def qualified(text: str, match: re.Match[str]) -> bool:
    """The window names the model's own instructions (a qualifier in it, or in the few words right
    after it: "the guidelines that preceded", "les consignes précédentes", "the instructions in your
    prompt"), and the override is affirmed (`affirmed`)."""
    if not affirmed(text, match):
        return False
    if window_words(match) & QUALIFIERS:
        return True
    after = _AFTER.match(text, match.end())
    following = set(re.findall(r"\w+", after.group())[:4]) if after is not None else set()
    return bool(following & (QUALIFIERS | POST_QUALIFIERS))


def near(words: frozenset[str], reach: int = 40) -> Accept:
    """One of `words` in the match or in the `reach` characters before it, and no third-person narrative."""

    def accept(text: str, match: re.Match[str]) -> bool:
        close = set(re.findall(r"\w+", text[max(0, match.start() - reach) : match.start()])) | window_words(match)
        return bool(close & words) and not close & NARRATIVE

    return accept


def within(words: frozenset[str]) -> Accept:
    """One of `words` inside the match, and no third-person narrative."""

    def accept(text: str, match: re.Match[str]) -> bool:
        inside = window_words(match)
        return bool(inside & words) and not inside & NARRATIVE

    return accept
