"""Input guardrails: check the prompt(s) before anything is sent upstream.

    outcome = await guard.check(request.prompt, facts, decoder=tokenizer_decode)
    if outcome.denied: raise outcome.error()            # 400 guardrail_violation
    request.prompt = outcome.prompt                      # redacted when a check redacted
    if outcome.max_tokens is not None: request.max_tokens = outcome.max_tokens

Each prompt of a list is checked on its own, all of them in one batch (see `engine`: a remote check
gets them together, within the request's `bounds`); verdicts keep the worst per check, with that
prompt's index. A token-id prompt is decoded with ``decoder`` (the deployment's tokenizer) when given, and a
redacted one is sent as text; without a decoder the length check counts its tokens exactly and every
other check records ``skipped``.

Other body fields the model reads are checked like the prompt by `check_fields` (the gateway passes
``suffix`` and, on a guarded deployment, every field the Completions reference does not know):
each string in them, nested in arrays and objects included, is checked on its own and redacted in
place; verdicts keep the worst per check and field, and name the field (``field``). At most
`MAX_FIELD_STRINGS` strings are checked per request: more is a deny.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import repeat
from typing import Any, cast

from policies.guardrails.base import PASS, CheckConfig, Decoder, Finding, RequestFacts
from policies.guardrails.bounds import DEFAULT_BOUNDS, GuardrailBounds
from policies.guardrails.engine import CheckSet, TextOutcome
from policies.guardrails.verdict import SEVERITY, GuardrailViolation, Verdict

Item = str | list[int]
MAX_FIELD_STRINGS = 256  # strings of fields other than the prompt checked per request


@dataclass(slots=True)
class InputOutcome:
    prompt: Any  # what to send upstream: the original object when nothing changed
    verdicts: list[Verdict] = field(default_factory=list)
    denied: Verdict | None = None
    max_tokens: int | None = None  # set when a length cap clamped the request's max_tokens
    texts: tuple[str, ...] = ()  # the prompts as (redacted) text, for output checks' RequestFacts.prompts
    changed: bool = False

    def error(self) -> GuardrailViolation:
        assert self.denied is not None
        return GuardrailViolation(self.denied)


@dataclass(slots=True)
class FieldsOutcome:
    values: dict[str, Any] = field(default_factory=dict)  # the fields a check redacted, with their new values
    verdicts: list[Verdict] = field(default_factory=list)  # each with its `field`
    denied: Verdict | None = None
    max_tokens: int | None = None

    def error(self) -> GuardrailViolation:
        assert self.denied is not None
        return GuardrailViolation(self.denied)


class InputGuard:
    def __init__(self, checks: Sequence[CheckConfig], bounds: GuardrailBounds = DEFAULT_BOUNDS) -> None:
        self._set = CheckSet(checks, "input", bounds)

    def __bool__(self) -> bool:
        return bool(self._set)

    async def check(self, prompt: Any, facts: RequestFacts, decoder: Decoder | None = None) -> InputOutcome:
        items, listed = _items(prompt)
        if all(map(isinstance, items, repeat(str))):  # the usual request: text only
            numbered: Sequence[int | None] = range(len(items)) if listed else [None] * len(items)
            results = await self._set.run_batch(cast(list[str], items), facts, numbered, first_deny=True)
            return _combine(prompt, items, listed, _until_denied(results))
        slots: list[TextOutcome | None] = [None] * len(items)
        texts: list[str] = []
        positions: list[int] = []
        for position, item in enumerate(items):
            text, undecodable = _as_text(item, decoder)
            if text is None:
                slots[position] = self._tokens_only(item, facts, position if listed else None, undecodable)
            else:
                texts.append(text)
                positions.append(position)
        if not any(slot is not None and slot.denied is not None for slot in slots):
            indexes = [position if listed else None for position in positions]
            checked = await self._set.run_batch(texts, facts, indexes, first_deny=True)
            for position, result in zip(positions, checked, strict=True):
                slots[position] = result
        return _combine(prompt, items, listed, _until_denied([slot for slot in slots if slot is not None]))

    async def check_fields(self, fields: Mapping[str, Any], facts: RequestFacts) -> FieldsOutcome:
        """Check every string of each field (nested ones too) like a prompt, all fields' strings in one
        batch; `values` holds the fields whose text a check redacted, rebuilt with the redacted strings."""
        outcome = FieldsOutcome()
        budget = MAX_FIELD_STRINGS
        named: list[tuple[str, Any, list[str]]] = []
        for name, value in fields.items():
            strings = list(dict.fromkeys(text for text in _strings(value) if text))  # each distinct one once
            budget -= len(strings)
            if budget < 0:
                reason = f"more than {MAX_FIELD_STRINGS} strings to check in fields other than the prompt"
                outcome.denied = Verdict("guardrails", "input", "deny", reason, field=name)
                outcome.verdicts.append(outcome.denied)
                return outcome
            named.append((name, value, strings))
        flat = [text for _, _, strings in named for text in strings]
        checked = await self._set.run_batch(flat, facts, [None] * len(flat), first_deny=True)
        at = 0
        for name, value, strings in named:
            results = _until_denied(checked[at : at + len(strings)])
            at += len(strings)
            outcome.verdicts.extend(replace(verdict, field=name) for verdict in _worst(results))
            denied = next((r.denied for r in results if r.denied is not None), None)
            if denied is not None:
                outcome.denied = replace(denied, field=name)
                return outcome
            clamps = [r.max_tokens for r in results if r.max_tokens is not None]
            if outcome.max_tokens is not None:
                clamps.append(outcome.max_tokens)
            outcome.max_tokens = min(clamps) if clamps else None
            if any(r.changed for r in results):
                redacted = {text: r.text for text, r in zip(strings, results, strict=True)}
                outcome.values[name] = _rebuild(value, redacted)
        return outcome

    def _tokens_only(self, ids: Item, facts: RequestFacts, index: int | None, why: str) -> TextOutcome:
        outcome = TextOutcome("")
        for config in self._set.configs:
            if self._set.apply(outcome, config, _token_finding(self._set, config, len(ids), facts, why), index):
                break
        return outcome


def _until_denied(results: list[TextOutcome]) -> list[TextOutcome]:
    """The results up to the first denied one: what is past it was not (or not fully) checked."""
    for position, result in enumerate(results):
        if result.denied is not None:
            return results[: position + 1]
    return results


def _token_finding(checks: CheckSet, config: CheckConfig, count: int, facts: RequestFacts, why: str) -> Finding:
    for check in checks.sync_checks:
        if check.config is config and hasattr(check, "evaluate_tokens"):
            found: Finding = check.evaluate_tokens(count, facts, "input")
            return found
    return Finding(hit=False, reason=why, status="skipped") if why else PASS


def _items(prompt: Any) -> tuple[list[Item], bool]:
    """The prompts to check, and whether the request gave a list of them (verdicts then carry an index)."""
    if prompt is None:
        return [], False
    if isinstance(prompt, str):
        return [prompt], False
    if prompt and all(map(isinstance, prompt, repeat(int))):
        return [prompt], False
    return list(prompt), True


def _strings(value: Any) -> Iterator[str]:
    """The strings of a JSON value, depth first (object values, not keys)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def _rebuild(value: Any, redacted: Mapping[str, str]) -> Any:
    """`value` with each string replaced by its redacted text (a string checked once, replaced everywhere)."""
    if isinstance(value, str):
        return redacted.get(value, value)
    if isinstance(value, list):
        return [_rebuild(item, redacted) for item in value]
    if isinstance(value, dict):
        return {key: _rebuild(item, redacted) for key, item in value.items()}
    return value


def _as_text(item: Item, decoder: Decoder | None) -> tuple[str | None, str]:
    if isinstance(item, str):
        return item, ""
    if decoder is None:
        return None, "prompt given as token ids and the deployment has no tokenizer"
    try:
        return decoder(item), ""
    except Exception as exc:  # any tokenizer failure means "could not check": recorded as skipped
        return None, f"token ids could not be decoded ({type(exc).__name__})"


def _combine(prompt: Any, items: list[Item], listed: bool, results: list[TextOutcome]) -> InputOutcome:
    if len(results) == 1 and len(items) == 1 and isinstance(items[0], str):  # one text: nothing to merge
        return _one(prompt, listed, results[0])
    outcome = InputOutcome(prompt, _worst(results))
    outcome.denied = next((r.denied for r in results if r.denied is not None), None)
    clamps = [r.max_tokens for r in results if r.max_tokens is not None]
    outcome.max_tokens = min(clamps) if clamps else None
    texts = [r.text if isinstance(item, str) or r.text else item for r, item in zip(results, items, strict=False)]
    outcome.texts = tuple(t for t in texts if isinstance(t, str))
    if any(r.changed for r in results) and outcome.denied is None:
        if len(outcome.texts) != len(items):  # a redacted list cannot mix text with undecodable token ids
            outcome.denied = Verdict(
                "guardrails", "input", "deny", "a prompt needs redaction but another could not be decoded"
            )
            return outcome
        outcome.changed = True
        outcome.prompt = list(outcome.texts) if listed else outcome.texts[0]
    return outcome


def _one(prompt: Any, listed: bool, result: TextOutcome) -> InputOutcome:
    """`_combine` of a single text prompt (the usual request, and each group of a chat's texts)."""
    outcome = InputOutcome(prompt, result.verdicts, result.denied, result.max_tokens, (result.text,))
    if result.changed and result.denied is None:
        outcome.changed = True
        outcome.prompt = [result.text] if listed else result.text
    return outcome


def _worst(results: list[TextOutcome]) -> list[Verdict]:
    if len(results) == 1:
        return results[0].verdicts
    worst: dict[str, Verdict] = {}
    for result in results:
        for verdict in result.verdicts:
            seen = worst.get(verdict.check)
            if seen is None or SEVERITY[verdict.verdict] > SEVERITY[seen.verdict]:
                worst[verdict.check] = verdict
    return list(worst.values())
