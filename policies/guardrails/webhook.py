"""`webhook`: post the text to an external guardrail service (Presidio, Llama Guard, your own).

``protocol: gateway`` (default) is this contract, small enough to put in front of any model::

    POST <url>   {"text": "...", "stage": "input"|"output", "check": "<name>", "index": 0,
                  "prompt": "..." | null, "context": "..." | null}
    200          {"flagged": true|false, "reason": "...", "score": 0.9, "labels": ["S1"], "text": "..."}

``flagged: true`` applies the check's action; ``text`` is the redacted text (needed by ``redact``:
a flagged answer without it is denied). Only ``flagged`` is required.

``protocol: presidio`` speaks Presidio's analyzer directly: it posts ``{"text", "language"}`` to
``/analyze`` and reads back its list of ``{"entity_type", "start", "end", "score"}``; results at or
above ``min_score`` are hits, redacted here with ``placeholder``.

Failures (timeout after ``timeout_ms``, connection error, non-2xx, unreadable body) record verdict
``error``; with ``fail_open: false`` (default) they also count as a hit, so a deny policy denies
while its guardrail service is down, and with ``fail_open: true`` the text passes. On streams this
check runs at the end of each choice (see `stream_guard`).
"""

from __future__ import annotations

from typing import Any, Literal

import aiohttp
from pydantic import Field, HttpUrl

from policies.guardrails.base import CheckConfig, Finding, RequestFacts, merge, redact
from policies.guardrails.verdict import Stage


class WebhookConfig(CheckConfig):
    check: Literal["webhook"]
    url: HttpUrl
    timeout_ms: float = Field(default=500.0, gt=0, le=60_000)
    fail_open: bool = False
    headers: dict[str, str] = Field(default_factory=dict)  # e.g. {"Authorization": "Bearer ${GUARD_TOKEN}"}
    protocol: Literal["gateway", "presidio"] = "gateway"
    language: str = "en"  # presidio
    min_score: float = Field(default=0.5, ge=0.0, le=1.0)  # presidio
    placeholder: str = "[{entity}]"  # presidio

    def build(self) -> WebhookCheck:
        return WebhookCheck(self)


class BadAnswer(ValueError):
    """The service answered something this protocol cannot read."""


class WebhookCheck:
    is_async = True
    needs_text = True

    def __init__(self, config: WebhookConfig) -> None:
        self.config = config
        self._url = str(config.url)
        self._timeout = aiohttp.ClientTimeout(total=config.timeout_ms / 1000)

    def evaluate(self, text: str, facts: RequestFacts, stage: Stage, index: int) -> Finding:
        raise TypeError("the webhook check is asynchronous: call evaluate_async")

    async def evaluate_async(self, text: str, facts: RequestFacts, stage: Stage, index: int) -> Finding:
        if facts.http is None:
            return self._failed("no HTTP session to reach the guardrail service")
        try:
            async with facts.http.post(
                self._url,
                json=self._payload(text, facts, stage, index),
                headers=self.config.headers,
                timeout=self._timeout,
            ) as response:
                if response.status >= 300:
                    return self._failed(f"guardrail service answered HTTP {response.status}")
                answer = await response.json(content_type=None)
        except TimeoutError:
            return self._failed(f"guardrail service timed out after {self.config.timeout_ms:g} ms")
        except (aiohttp.ClientError, ValueError) as exc:
            return self._failed(f"guardrail service unreachable or unreadable: {type(exc).__name__}")
        try:
            return self._read(answer, text)
        except BadAnswer as exc:
            return self._failed(f"guardrail service answer not understood: {exc}")

    def _payload(self, text: str, facts: RequestFacts, stage: Stage, index: int) -> dict[str, Any]:
        if self.config.protocol == "presidio":
            return {"text": text, "language": self.config.language}
        prompt = facts.prompt_for(index) if stage == "output" else None
        return {
            "text": text,
            "stage": stage,
            "check": self.config.label,
            "index": index,
            "prompt": prompt,
            "context": facts.context,
        }

    def _read(self, answer: Any, text: str) -> Finding:
        if self.config.protocol == "presidio":
            return self._read_presidio(answer, text)
        if not isinstance(answer, dict) or not isinstance(answer.get("flagged"), bool):
            raise BadAnswer("expected an object with a boolean 'flagged'")
        labels = answer.get("labels") or []
        replacement = answer.get("text")
        score = answer.get("score")
        return Finding(
            hit=answer["flagged"],
            reason=str(answer.get("reason") or ("flagged by guardrail service" if answer["flagged"] else ""))[:300]
            or None,
            score=float(score) if isinstance(score, int | float) else None,
            labels=tuple(str(label) for label in labels) if isinstance(labels, list) else (),
            text=replacement if isinstance(replacement, str) else None,
        )

    def _read_presidio(self, answer: Any, text: str) -> Finding:
        if not isinstance(answer, list):
            raise BadAnswer("expected a list of analyzer results")
        try:
            hits = [
                (int(r["start"]), int(r["end"]), str(r["entity_type"]))
                for r in answer
                if float(r["score"]) >= self.config.min_score
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise BadAnswer("analyzer results need entity_type, start, end and score") from exc
        if not hits:
            return Finding(hit=False)
        labels = tuple(dict.fromkeys(entity for _, _, entity in hits))
        spans = merge(
            [(s, e, self.config.placeholder.format(entity=entity)) for s, e, entity in hits if 0 <= s < e <= len(text)]
        )
        return Finding(hit=True, reason=f"found: {', '.join(labels)}", labels=labels, text=redact(text, spans))

    def _failed(self, reason: str) -> Finding:
        mode = "failing open" if self.config.fail_open else "failing closed"
        return Finding(hit=not self.config.fail_open, reason=f"{reason}; {mode}", status="error")
