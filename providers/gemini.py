"""Google's Gemini API (`models/{model}:generateContent`, and `:streamGenerateContent?alt=sse`)
behind the Completions and the Chat Completions APIs, and its `:embedContent` / `:batchEmbedContents`
behind the Embeddings API (`providers.embed.gemini`).

For completions each prompt is one call with the prompt as its user content; for chat the
messages, tools and tool calls are translated (`providers.chat.gemini`). `n` is `candidateCount`.
Sampling parameters go in `generationConfig`; `logprobs: k` (chat: `top_logprobs: k`) asks
`responseLogprobs` with `k` alternatives. Gemini has no logit_bias and no end-user field, and
cannot turn parallel function calls off: asking for them is a 400.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import orjson

from providers.base import Api, Provider
from providers.chat.gemini import answer_calls, conversation, output_format, tool_fields
from providers.chat.messages import Refusal
from providers.chat.params import CHAT, max_completion_tokens, top_logprobs
from providers.chat.shape import chat_logprobs
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
from providers.completion_shape import Choice, FinishReason, Reply, TokenLogprob, ToolCall, Usage, completion_logprobs
from providers.embed import gemini as gemini_embed
from providers.options import HttpUrl, TranslatedOptions
from providers.translated.adapter import AnswerProblem, Embedded, Plan, UpstreamCall, stream_error_event
from providers.translated.provider import TranslatedProvider

API = "the Gemini API"
_RULES: dict[str, Rule] = {
    name: supported for name in ("presence_penalty", "frequency_penalty", "seed", "logprobs", "top_k")
}
_CHAT_RULES: dict[str, Rule] = {
    **_RULES,
    **dict.fromkeys(("top_logprobs", "tools", "tool_choice", "response_format"), supported),
    "parallel_tool_calls": lambda value, body: (
        None if value is not False or not body.get("tools") else f"{API} cannot turn parallel function calls off"
    ),
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
    # Google's Generative Language API, or a compatible server.
    base_url: HttpUrl = "https://generativelanguage.googleapis.com"
    # The API version in the path (v1beta, v1).
    api_version: str = "v1beta"


class GeminiAdapter:
    api = API
    end_marker = "a finishReason"

    def __init__(self, deployment: str, options: GeminiOptions, credential: str | None) -> None:
        self._deployment = deployment
        self._options = options
        self._refuse = Refusal(deployment, API)
        self._base = f"{options.base_url.rstrip('/')}/{options.api_version}/"
        self.headers: Mapping[str, str] = {
            **options.headers,
            **({"x-goog-api-key": credential} if credential else {}),
        }

    def plan(self, body: dict[str, Any], stream: bool, api: Api) -> Plan:
        options = self._options
        if api == "chat":
            return self._plan_chat(body, stream)
        if api == "embeddings":
            return self._plan_embeddings(body)
        body = check_params(body, _RULES, drop=options.drop_params, deployment=self._deployment, api=API)
        prompts = text_prompts(body, self._deployment, API)
        model = options.model or str(body["model"])
        config = _generation_config(body, max_tokens(body, options.default_max_tokens), body.get("logprobs"))
        template: dict[str, Any] = {"generationConfig": config}
        if options.system_prompt:
            template["systemInstruction"] = {"parts": [{"text": options.system_prompt}]}
        n = choices_per_prompt(body)
        url = self._url(model, stream)
        calls = [
            UpstreamCall(url, {**template, "contents": [{"role": "user", "parts": [{"text": prompt}]}]}, n)
            for prompt in prompts
        ]
        return Plan(calls, model.removeprefix("models/"), include_usage(body))

    def _plan_chat(self, body: dict[str, Any], stream: bool) -> Plan:
        """One call: the conversation, `n` candidates. Without a token limit Gemini's own applies."""
        options = self._options
        body = check_params(
            body, _CHAT_RULES, drop=options.drop_params, deployment=self._deployment, api=API, reference=CHAT
        )
        model = options.model or str(body["model"])
        system, contents = conversation(body, self._refuse)
        system = [options.system_prompt, *system] if options.system_prompt else system
        config = _generation_config(body, max_completion_tokens(body, None), top_logprobs(body))
        call: dict[str, Any] = {"contents": contents, "generationConfig": {**config, **output_format(body)}}
        if system:
            call["systemInstruction"] = {"parts": [{"text": text} for text in system]}
        call.update(tool_fields(body, self._refuse))
        upstream = UpstreamCall(self._url(model, stream), call, choices_per_prompt(body), "chat")
        return Plan([upstream], model.removeprefix("models/"), include_usage(body))

    def _plan_embeddings(self, body: dict[str, Any]) -> Plan:
        model = self._options.model or str(body["model"])
        resource = _resource(model)
        calls = gemini_embed.plan_calls(
            body,
            self._base + quote(resource, safe="/-._~"),
            resource,
            drop=self._options.drop_params,
            deployment=self._deployment,
            api=API,
        )
        return Plan(calls, model.removeprefix("models/"))

    def embedded(self, call: UpstreamCall, body: dict[str, Any]) -> Embedded:
        return gemini_embed.embedded(call, body)

    def _url(self, model: str, stream: bool) -> str:
        method = ":streamGenerateContent?alt=sse" if stream else ":generateContent"
        return self._base + quote(_resource(model), safe="/-._~") + method

    def reply(self, call: UpstreamCall, body: dict[str, Any]) -> Reply:
        candidates = body.get("candidates")
        if not candidates:
            if _prompt_blocked(body):  # nothing generated: every choice is filtered
                return Reply([Choice(j, "", "content_filter") for j in range(call.choices)], _usage(body))
            raise AnswerProblem("answered without 'candidates'")
        if not isinstance(candidates, list):
            raise AnswerProblem("answered with 'candidates' that is not a list")
        choices = []
        for position, candidate in enumerate(candidates):
            calls = answer_calls(_parts(candidate)) if call.api == "chat" else []
            finish = _finish(candidate.get("finishReason")) or "stop"
            logprobs = _logprobs(candidate.get("logprobsResult"), call, 0)
            index = int(candidate.get("index", position))
            choices.append(Choice(index, _text(candidate), _with_calls(finish, calls), logprobs, calls))
        return Reply(choices, _usage(body), body.get("modelVersion"))

    def translator(self, call: UpstreamCall) -> GeminiStreamTranslator:
        return GeminiStreamTranslator(call)

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

    def __init__(self, call: UpstreamCall) -> None:
        self.usage: Usage | None = None
        self._call = call
        self._expected = call.choices
        self._finished: set[int] = set()
        self._offsets: dict[int, int] = {}
        self._calls: dict[int, int] = {}  # tool calls made so far, per candidate (chat)

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
            logprobs = _logprobs(candidate.get("logprobsResult"), self._call, self._offsets.get(index, 0))
            if logprobs is not None and "tokens" in logprobs:
                self._offsets[index] = self._offsets.get(index, 0) + sum(map(len, logprobs["tokens"]))
            calls: list[ToolCall] = []
            if self._call.api == "chat":
                calls = answer_calls(_parts(candidate), self._calls.get(index, 0))
                self._calls[index] = self._calls.get(index, 0) + len(calls)
            if finish is not None:
                self._finished.add(index)
                finish = _with_calls(finish, [None] * self._calls.get(index, 0))
            text = _text(candidate)
            if text or finish or logprobs or calls:
                deltas.append(Choice(index, text, finish, logprobs, calls))
        return deltas


def create(deployment: str, options: GeminiOptions, credential: str | None) -> Provider:
    return TranslatedProvider(deployment, GeminiAdapter(deployment, options, credential), credential, options)


def _resource(model: str) -> str:
    return model if "/" in model else f"models/{model}"  # also tunedModels/…


def _generation_config(body: dict[str, Any], limit: int | None, logprobs: int | None) -> dict[str, Any]:
    """`logprobs`: None for none, else how many alternatives each token lists."""
    config = {target: body[name] for name, target in _CONFIG_NAMES.items() if body.get(name) is not None}
    if limit is not None:
        config["maxOutputTokens"] = limit
    if stop := stop_sequences(body):
        config["stopSequences"] = stop
    if choices_per_prompt(body) > 1:
        config["candidateCount"] = choices_per_prompt(body)
    if logprobs is not None:
        config["responseLogprobs"] = True
        if logprobs > 0:
            config["logprobs"] = logprobs
    return config


def _parts(candidate: dict[str, Any]) -> list[Any]:
    return list((candidate.get("content") or {}).get("parts") or [])


def _text(candidate: dict[str, Any]) -> str:
    """The candidate's text parts, without the model's thoughts."""
    return "".join(
        str(part.get("text", "")) for part in _parts(candidate) if isinstance(part, dict) and not part.get("thought")
    )


def _with_calls(finish: FinishReason, calls: list[Any]) -> FinishReason:
    """Gemini ends a turn of function calls with STOP; OpenAI's word for it is tool_calls."""
    return "tool_calls" if calls and finish == "stop" else finish


def _finish(reason: Any) -> FinishReason | None:
    """STOP → stop, MAX_TOKENS → length, SAFETY and the other filters → content_filter; the rest
    (OTHER, MALFORMED_FUNCTION_CALL, …) end the choice as stop does."""
    return None if reason is None else _FINISH.get(str(reason), "stop")


def _prompt_blocked(body: dict[str, Any]) -> bool:
    return bool((body.get("promptFeedback") or {}).get("blockReason"))


def _logprobs(result: Any, call: UpstreamCall, offset: int) -> dict[str, Any] | None:
    """In the call's client API shape; `offset`: where the text of a completions stream is."""
    if not isinstance(result, dict) or not isinstance(result.get("chosenCandidates"), list):
        return None
    tops = result.get("topCandidates") or []
    entries = []
    for step, chosen in enumerate(result["chosenCandidates"]):
        alternatives = (tops[step].get("candidates") or []) if step < len(tops) else []
        top = tuple((str(item.get("token", "")), float(item.get("logProbability", 0.0))) for item in alternatives)
        entries.append(TokenLogprob(str(chosen.get("token", "")), float(chosen.get("logProbability", 0.0)), top))
    if call.api == "chat":
        return chat_logprobs(entries, int(call.body["generationConfig"].get("logprobs", 0)))
    return completion_logprobs(entries, offset)


def _usage(body: dict[str, Any]) -> Usage | None:
    """Completion tokens include the model's thinking tokens, as OpenAI counts reasoning tokens
    (and reports them as such); cached content tokens are the prompt's cached tokens."""
    usage = body.get("usageMetadata")
    if not isinstance(usage, dict):
        return None
    thoughts, cached = usage.get("thoughtsTokenCount"), usage.get("cachedContentTokenCount")
    completion = int(usage.get("candidatesTokenCount") or 0) + int(thoughts or 0)
    return Usage(
        int(usage.get("promptTokenCount") or 0),
        completion,
        reasoning_tokens=None if thoughts is None else int(thoughts),
        cached_tokens=None if cached is None else int(cached),
    )
