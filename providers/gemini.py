"""Google's Gemini API (`models/{model}:generateContent`, and `:streamGenerateContent?alt=sse`)
behind the Completions API.

Each prompt is one call with the prompt as its user content; `n` is `candidateCount`. Sampling
parameters go in `generationConfig`; `logprobs: k` asks `responseLogprobs` with `k` alternatives.
Gemini has no logit_bias and no end-user field: asking for them is a 400.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import orjson

from providers.base import Provider
from providers.completion_params import (
    Rule,
    check_params,
    choices_per_prompt,
    include_usage,
    max_tokens,
    stop_sequences,
    supported,
    text_prompts,
)
from providers.completion_shape import Choice, FinishReason, Reply, TokenLogprob, Usage, completion_logprobs
from providers.options import HttpUrl, TranslatedOptions
from providers.translated.adapter import AnswerProblem, Plan, UpstreamCall, stream_error_event
from providers.translated.provider import TranslatedProvider

API = "the Gemini API"
_RULES: dict[str, Rule] = {
    name: supported for name in ("presence_penalty", "frequency_penalty", "seed", "logprobs", "top_k")
}
# Completions name -> generationConfig name, for the values that map as they are.
_CONFIG_NAMES = {
    "temperature": "temperature",
    "top_p": "topP",
    "top_k": "topK",
    "seed": "seed",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
}
_FINISH: dict[str, FinishReason] = {
    "MAX_TOKENS": "length",
    **dict.fromkeys(
        ("SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"), "content_filter"
    ),
}


class GeminiOptions(TranslatedOptions):
    base_url: HttpUrl = "https://generativelanguage.googleapis.com"
    api_version: str = "v1beta"


class GeminiAdapter:
    api = API
    end_marker = "a finishReason"

    def __init__(self, deployment: str, options: GeminiOptions, credential: str | None) -> None:
        self._deployment = deployment
        self._options = options
        self._base = f"{options.base_url.rstrip('/')}/{options.api_version}/"
        self.headers: Mapping[str, str] = {
            **options.headers,
            **({"x-goog-api-key": credential} if credential else {}),
        }

    def plan(self, body: dict[str, Any], stream: bool) -> Plan:
        options = self._options
        body = check_params(body, _RULES, drop=options.drop_params, deployment=self._deployment, api=API)
        prompts = text_prompts(body, self._deployment, API)
        model = options.model or str(body["model"])
        resource = model if "/" in model else f"models/{model}"  # also tunedModels/…
        method = ":streamGenerateContent?alt=sse" if stream else ":generateContent"
        url = self._base + quote(resource, safe="/-._~") + method
        template: dict[str, Any] = {"generationConfig": _generation_config(body, options.default_max_tokens)}
        if options.system_prompt:
            template["systemInstruction"] = {"parts": [{"text": options.system_prompt}]}
        n = choices_per_prompt(body)
        calls = [
            UpstreamCall(url, {**template, "contents": [{"role": "user", "parts": [{"text": prompt}]}]}, n)
            for prompt in prompts
        ]
        return Plan(calls, model.removeprefix("models/"), include_usage(body))

    def reply(self, call: UpstreamCall, body: dict[str, Any]) -> Reply:
        candidates = body.get("candidates")
        if not candidates:
            if _prompt_blocked(body):  # nothing generated: every choice is filtered
                return Reply([Choice(j, "", "content_filter") for j in range(call.choices)], _usage(body))
            raise AnswerProblem("answered without 'candidates'")
        if not isinstance(candidates, list):
            raise AnswerProblem("answered with 'candidates' that is not a list")
        choices = [
            Choice(
                index=int(candidate.get("index", position)),
                text=_text(candidate),
                finish_reason=_finish(candidate.get("finishReason")) or "stop",
                logprobs=_logprobs(candidate.get("logprobsResult"), 0),
            )
            for position, candidate in enumerate(candidates)
        ]
        return Reply(choices, _usage(body), body.get("modelVersion"))

    def translator(self, call: UpstreamCall) -> GeminiStreamTranslator:
        return GeminiStreamTranslator(call.choices)

    def error_answer(self, raw: bytes) -> bytes:
        """{"error": {"code": 400, "message", "status": "INVALID_ARGUMENT"}} → OpenAI's envelope."""
        try:
            error = orjson.loads(raw).get("error")
        except (orjson.JSONDecodeError, AttributeError):
            return raw
        if not isinstance(error, dict):
            return raw
        status = error.get("status")
        code = str(status).lower() if status else None
        envelope = {"message": error.get("message"), "type": "invalid_request_error", "param": None, "code": code}
        return orjson.dumps({"error": envelope})


class GeminiStreamTranslator:
    """Each event is a partial GenerateContentResponse; the stream has no end event, so it is whole
    when every candidate has a finishReason by the time the upstream closes it."""

    ended = False

    def __init__(self, candidates: int) -> None:
        self.usage: Usage | None = None
        self._expected = candidates
        self._finished: set[int] = set()
        self._offsets: dict[int, int] = {}

    @property
    def complete_at_eof(self) -> bool:
        return len(self._finished) >= self._expected

    def feed(self, event: dict[str, Any]) -> list[Choice]:
        if isinstance(event.get("error"), dict):
            raise stream_error_event(event["error"])
        self.usage = _usage(event) or self.usage
        candidates = event.get("candidates") or []
        if not candidates and _prompt_blocked(event):
            self._finished.update(range(self._expected))
            return [Choice(j, "", "content_filter") for j in range(self._expected)]
        deltas = []
        for position, candidate in enumerate(candidates):
            index = int(candidate.get("index", position))
            finish = _finish(candidate.get("finishReason"))
            logprobs = _logprobs(candidate.get("logprobsResult"), self._offsets.get(index, 0))
            if logprobs is not None:
                self._offsets[index] = self._offsets.get(index, 0) + sum(map(len, logprobs["tokens"]))
            if finish is not None:
                self._finished.add(index)
            text = _text(candidate)
            if text or finish or logprobs:
                deltas.append(Choice(index, text, finish, logprobs))
        return deltas


def create(deployment: str, options: GeminiOptions, credential: str | None) -> Provider:
    return TranslatedProvider(deployment, GeminiAdapter(deployment, options, credential), credential, options)


def _generation_config(body: dict[str, Any], default_max_tokens: int | None) -> dict[str, Any]:
    config = {target: body[name] for name, target in _CONFIG_NAMES.items() if body.get(name) is not None}
    limit = max_tokens(body, default_max_tokens)
    if limit is not None:
        config["maxOutputTokens"] = limit
    if stop := stop_sequences(body):
        config["stopSequences"] = stop
    if choices_per_prompt(body) > 1:
        config["candidateCount"] = choices_per_prompt(body)
    if body.get("logprobs") is not None:
        config["responseLogprobs"] = True
        if body["logprobs"] > 0:
            config["logprobs"] = body["logprobs"]
    return config


def _text(candidate: dict[str, Any]) -> str:
    """The candidate's text parts, without the model's thoughts."""
    parts = (candidate.get("content") or {}).get("parts") or []
    return "".join(str(part.get("text", "")) for part in parts if isinstance(part, dict) and not part.get("thought"))


def _finish(reason: Any) -> FinishReason | None:
    """STOP → stop, MAX_TOKENS → length, SAFETY and the other filters → content_filter; the rest
    (OTHER, MALFORMED_FUNCTION_CALL, …) end the choice as stop does."""
    return None if reason is None else _FINISH.get(str(reason), "stop")


def _prompt_blocked(body: dict[str, Any]) -> bool:
    return bool((body.get("promptFeedback") or {}).get("blockReason"))


def _logprobs(result: Any, offset: int) -> dict[str, Any] | None:
    if not isinstance(result, dict) or not isinstance(result.get("chosenCandidates"), list):
        return None
    tops = result.get("topCandidates") or []
    entries = []
    for step, chosen in enumerate(result["chosenCandidates"]):
        alternatives = (tops[step].get("candidates") or []) if step < len(tops) else []
        top = tuple((str(item.get("token", "")), float(item.get("logProbability", 0.0))) for item in alternatives)
        entries.append(TokenLogprob(str(chosen.get("token", "")), float(chosen.get("logProbability", 0.0)), top))
    return completion_logprobs(entries, offset)


def _usage(body: dict[str, Any]) -> Usage | None:
    """Completion tokens include the model's thinking tokens, as OpenAI counts reasoning tokens."""
    usage = body.get("usageMetadata")
    if not isinstance(usage, dict):
        return None
    completion = int(usage.get("candidatesTokenCount") or 0) + int(usage.get("thoughtsTokenCount") or 0)
    return Usage(int(usage.get("promptTokenCount") or 0), completion)
