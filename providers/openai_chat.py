"""Chat-only models behind the Completions API, through any OpenAI-compatible `/chat/completions`
(OpenAI's chat models, vLLM, Ollama, Groq, Together, …).

Each prompt becomes one chat request with the prompt as its user message; a list of prompts is
that many concurrent calls. Sampling parameters map one to one, `logprobs: k` becomes
`logprobs: true, top_logprobs: k`, and fields the Completions reference does not know are
forwarded untouched (vLLM's `top_k`, …), as they are to OpenAI-compatible completion servers.

A Chat Completions request is forwarded as it came (the deployment's `model`, `system_prompt`,
`drop_params` and `max_tokens_field` applied) and its answer or stream relayed as it came.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from providers.base import Api, Provider
from providers.chat.params import CHAT, CHAT_FIELDS
from providers.completion_params import (
    COMPLETION_FIELDS,
    Rule,
    check_params,
    choices_per_prompt,
    include_usage,
    max_tokens,
    supported,
    text_prompts,
)
from providers.completion_shape import Choice, FinishReason, Reply, TokenLogprob, Usage, completion_logprobs
from providers.options import TranslatedOptions
from providers.translated.adapter import AnswerProblem, Plan, UpstreamCall, stream_error_event
from providers.translated.provider import TranslatedProvider

API = "the chat completions API"
_COPIED = ("temperature", "top_p", "n", "stop", "seed", "presence_penalty", "frequency_penalty", "logit_bias", "user")
_RULES: dict[str, Rule] = {
    name: supported for name in ("seed", "presence_penalty", "frequency_penalty", "logit_bias", "user", "logprobs")
}
_CHAT_RULES: dict[str, Rule] = dict.fromkeys(CHAT_FIELDS, supported)  # the upstream takes them all
_FINISH: dict[str, FinishReason] = {"length": "length", "content_filter": "content_filter"}


class OpenAIChatOptions(TranslatedOptions):
    # OpenAI's newer models take `max_completion_tokens` and refuse `max_tokens`; most servers take both.
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"


class OpenAIChatAdapter:
    api = API
    end_marker = "[DONE]"

    def __init__(self, deployment: str, options: OpenAIChatOptions, credential: str | None) -> None:
        self._deployment = deployment
        self._options = options
        self._url = options.base_url.rstrip("/") + "/chat/completions"
        self.headers: Mapping[str, str] = {
            **options.headers,
            **({"Authorization": f"Bearer {credential}"} if credential else {}),
        }

    def plan(self, body: dict[str, Any], stream: bool, api: Api) -> Plan:
        options = self._options
        if api == "chat":
            return self._plan_chat(body)
        body = check_params(
            body, _RULES, drop=options.drop_params, deployment=self._deployment, api=API, forwards_unknown=True
        )
        prompts = text_prompts(body, self._deployment, API)
        model = options.model or str(body["model"])
        template = {name: value for name, value in body.items() if name not in COMPLETION_FIELDS}
        template["model"] = model
        template.update({name: body[name] for name in _COPIED if body.get(name) is not None})
        limit = max_tokens(body, options.default_max_tokens)
        if limit is not None:
            template[options.max_tokens_field] = limit
        if body.get("logprobs") is not None:
            template.update(logprobs=True, top_logprobs=body["logprobs"])
        if stream:
            template["stream"] = True
            if include_usage(body):
                template["stream_options"] = {"include_usage": True}
        n = choices_per_prompt(body)
        calls = [UpstreamCall(self._url, {**template, "messages": self._messages(prompt)}, n) for prompt in prompts]
        return Plan(calls, model, include_usage(body))

    def _plan_chat(self, body: dict[str, Any]) -> Plan:
        """The body as it came, with what the deployment says about its upstream; relayed back."""
        options = self._options
        body = check_params(
            body,
            _CHAT_RULES,
            drop=options.drop_params,
            deployment=self._deployment,
            api=API,
            forwards_unknown=True,
            reference=CHAT,
        )
        model = options.model or str(body["model"])
        body["model"] = model
        if options.max_tokens_field == "max_completion_tokens" and "max_tokens" in body:  # refused upstream
            limit = body.pop("max_tokens")
            if body.get("max_completion_tokens") is None and limit is not None:
                body["max_completion_tokens"] = limit
        if options.system_prompt:
            body["messages"] = [{"role": "system", "content": options.system_prompt}, *body["messages"]]
        return Plan([UpstreamCall(self._url, body, int(body.get("n") or 1), "chat")], model, relay=True)

    def reply(self, call: UpstreamCall, body: dict[str, Any]) -> Reply:
        choices = body.get("choices")
        if not isinstance(choices, list) or not all(isinstance(choice, dict) for choice in choices):
            raise AnswerProblem("answered without a list of 'choices'")
        translated = [
            Choice(
                index=int(choice.get("index", position)),
                text=_text((choice.get("message") or {}).get("content")),
                finish_reason=_finish(choice.get("finish_reason")) or "stop",
                logprobs=_logprobs(choice.get("logprobs"), 0),
            )
            for position, choice in enumerate(choices)
        ]
        return Reply(translated, _usage(body.get("usage")), body.get("model"), body.get("system_fingerprint"))

    def translator(self, call: UpstreamCall) -> ChatStreamTranslator:
        return ChatStreamTranslator()

    def error_answer(self, raw: bytes) -> bytes:
        return raw  # already OpenAI's envelope

    def _messages(self, prompt: str) -> list[dict[str, str]]:
        messages = [{"role": "system", "content": self._options.system_prompt}] if self._options.system_prompt else []
        return [*messages, {"role": "user", "content": prompt}]


class ChatStreamTranslator:
    ended = False  # the stream ends with [DONE], which the decoder sees
    complete_at_eof = False

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self._offsets: dict[int, int] = {}  # text offset reached per choice, for logprobs

    def feed(self, event: dict[str, Any]) -> list[Choice]:
        if isinstance(event.get("error"), dict):
            raise stream_error_event(event["error"])
        if isinstance(event.get("usage"), dict):
            self.usage = _usage(event["usage"])
        deltas = []
        for choice in event.get("choices") or []:
            index = int(choice.get("index", 0))
            text = _text((choice.get("delta") or {}).get("content"))
            finish = _finish(choice.get("finish_reason"))
            logprobs = _logprobs(choice.get("logprobs"), self._offsets.get(index, 0))
            if logprobs is not None:
                self._offsets[index] = self._offsets.get(index, 0) + sum(map(len, logprobs["tokens"]))
            if text or finish or logprobs:
                deltas.append(Choice(index, text, finish, logprobs))
        return deltas


def create(deployment: str, options: OpenAIChatOptions, credential: str | None) -> Provider:
    adapter = OpenAIChatAdapter(deployment, options, credential)
    return TranslatedProvider(deployment, adapter, credential, options)


def _text(content: Any) -> str:
    return content if isinstance(content, str) else ""


def _finish(reason: Any) -> FinishReason | None:
    """`tool_calls` and `function_call` (never asked for here) end a choice as `stop` does."""
    return None if reason is None else _FINISH.get(str(reason), "stop")


def _logprobs(logprobs: Any, offset: int) -> dict[str, Any] | None:
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list):
        return None
    entries = [
        TokenLogprob(
            token=str(item.get("token", "")),
            logprob=float(item.get("logprob", 0.0)),
            top=tuple((str(top["token"]), float(top["logprob"])) for top in item.get("top_logprobs") or []),
        )
        for item in content
    ]
    return completion_logprobs(entries, offset)


def _usage(usage: Any) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    return Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))
