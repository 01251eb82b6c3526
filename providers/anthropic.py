"""Anthropic's Messages API (`POST {base_url}/v1/messages`) behind the Completions and the Chat
Completions APIs.

For completions each prompt is one user message; for chat the messages, tools and tool calls are
translated (`providers.chat.anthropic`). The Messages API answers one message per call, so `n`
samples are `n` concurrent calls. It requires `max_tokens`: the client's, else the deployment's
`default_max_tokens` (16, the Completions default) for completions and `chat_max_tokens` for chat.
It has no logprobs, penalties, seed, logit_bias or response_format, and takes temperature only up
to 1: asking for them is a 400.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field

from providers.base import Api, Provider
from providers.chat.anthropic import answer_content, conversation, tool_fields
from providers.chat.messages import Refusal
from providers.chat.params import CHAT, max_completion_tokens
from providers.completion_params import (
    Rule,
    at_most,
    check_params,
    choices_per_prompt,
    include_usage,
    max_tokens,
    stop_sequences,
    supported,
    text_prompts,
)
from providers.completion_shape import Choice, FinishReason, Reply, ToolCall, Usage
from providers.options import HttpUrl, TranslatedOptions
from providers.translated.adapter import AnswerProblem, Plan, UpstreamCall
from providers.translated.provider import TranslatedProvider

API = "the Anthropic Messages API"
_RULES: dict[str, Rule] = {"temperature": at_most(1.0, API), "user": supported, "top_k": supported}
_CHAT_RULES: dict[str, Rule] = {
    **_RULES,
    **dict.fromkeys(("tools", "tool_choice", "parallel_tool_calls"), supported),
}
_STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}

# The HTTP status each error type has when it is the answer's status (Anthropic's error reference),
# so that an error event in a stream is retried, or not, as that status would be.
_ERROR_STATUSES = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


class AnthropicOptions(TranslatedOptions):
    # Anthropic's API, or a compatible server.
    base_url: HttpUrl = "https://api.anthropic.com"
    anthropic_version: str = "2023-06-01"  # the `anthropic-version` header
    default_max_tokens: Annotated[int, Field(ge=1)] = 16  # required by the API: never unset
    # max_tokens of a chat request that gives none (chat has no small default, as completions has).
    chat_max_tokens: Annotated[int, Field(ge=1)] = 4096


class AnthropicAdapter:
    api = API
    end_marker = "message_stop"

    def __init__(self, deployment: str, options: AnthropicOptions, credential: str | None) -> None:
        self._deployment = deployment
        self._options = options
        self._refuse = Refusal(deployment, API)
        self.url = options.base_url.rstrip("/") + "/v1/messages"
        self.headers: Mapping[str, str] = {
            **options.headers,
            "anthropic-version": options.anthropic_version,
            **({"x-api-key": credential} if credential else {}),
        }

    def plan(self, body: dict[str, Any], stream: bool, api: Api) -> Plan:
        options = self._options
        if api == "chat":
            return self._plan_chat(body, stream)
        body = check_params(body, _RULES, drop=options.drop_params, deployment=self._deployment, api=API)
        prompts = text_prompts(body, self._deployment, API)
        template = self._template(body, stream, max_tokens(body, options.default_max_tokens))
        if options.system_prompt:
            template["system"] = options.system_prompt
        calls = [
            UpstreamCall(self.url, {**template, "messages": [{"role": "user", "content": prompt}]}, 1)
            for prompt in prompts
            for _ in range(choices_per_prompt(body))
        ]
        return Plan(calls, template["model"], include_usage(body))

    def _plan_chat(self, body: dict[str, Any], stream: bool) -> Plan:
        options = self._options
        body = check_params(
            body, _CHAT_RULES, drop=options.drop_params, deployment=self._deployment, api=API, reference=CHAT
        )
        template = self._template(body, stream, max_completion_tokens(body, options.chat_max_tokens))
        system, turns = conversation(body, self._refuse)
        system = [options.system_prompt, *system] if options.system_prompt else system
        if system:
            template["system"] = "\n\n".join(system)
        template.update(tool_fields(body, self._refuse), messages=turns)
        call = UpstreamCall(self.url, template, 1, "chat")
        return Plan([call] * choices_per_prompt(body), template["model"], include_usage(body))

    def model(self, body: dict[str, Any]) -> str:
        """The model the upstream is asked for: the deployment's, else the request's."""
        return self._options.model or str(body["model"])

    def _template(self, body: dict[str, Any], stream: bool, limit: int | None) -> dict[str, Any]:
        """What every call of the request sends besides its messages (and system)."""
        template: dict[str, Any] = {"model": self.model(body), "max_tokens": limit}
        if stop := stop_sequences(body):
            template["stop_sequences"] = stop
        for name in ("temperature", "top_k"):
            if body.get(name) is not None:
                template[name] = body[name]
        if body.get("top_p") not in (None, 1, 1.0):  # 1 keeps every token: the same as not sending it
            template["top_p"] = body["top_p"]
        if body.get("user") is not None:
            template["metadata"] = {"user_id": body["user"]}
        if stream:
            template["stream"] = True
        return template

    def reply(self, call: UpstreamCall, body: dict[str, Any]) -> Reply:
        content = body.get("content")
        if not isinstance(content, list):
            raise AnswerProblem("answered without a 'content' list")
        text, calls = answer_content(content)
        if call.api != "chat":
            calls = []
        choice = Choice(0, text, _finish(body.get("stop_reason"), call.api) or "stop", tool_calls=calls)
        return Reply([choice], _usage(body.get("usage")), body.get("model"))

    def translator(self, call: UpstreamCall) -> MessagesStreamTranslator:
        return MessagesStreamTranslator(call.api)

    def error_answer(self, raw: bytes) -> bytes:
        return raw  # {"type": "error", "error": {"type", "message"}}: the fields OpenAI's envelope has


class MessagesStreamTranslator:
    """message_start (input usage), content_block_delta (text), message_delta (stop reason, output
    usage), message_stop (the end); ping and block stop carry nothing; error fails it. For chat, a
    tool_use block's start names a tool call and its input_json_delta events add its arguments."""

    complete_at_eof = False

    def __init__(self, api: Api = "completions") -> None:
        self.ended = False
        self.usage: Usage | None = None
        self._api = api
        self._calls: dict[int, int] = {}  # content block index -> tool call index, for chat

    def feed(self, event: dict[str, Any]) -> list[Choice]:
        kind = event.get("type")
        if kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta" and delta.get("text"):
                return [Choice(0, str(delta["text"]), None)]
            call = self._calls.get(int(event.get("index", -1)))
            if delta.get("type") == "input_json_delta" and call is not None and delta.get("partial_json"):
                return [Choice(0, "", None, tool_calls=[ToolCall(call, None, None, str(delta["partial_json"]))])]
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use" and self._api == "chat":
                call = self._calls[int(event["index"])] = len(self._calls)
                return [Choice(0, "", None, tool_calls=[ToolCall(call, str(block["id"]), str(block["name"]), "")])]
        elif kind == "message_start":
            self.usage = _usage((event.get("message") or {}).get("usage")) or Usage()
        elif kind == "message_delta":
            self._update_usage(event.get("usage"))
            finish = _finish((event.get("delta") or {}).get("stop_reason"), self._api)
            if finish is not None:
                return [Choice(0, "", finish)]
        elif kind == "message_stop":
            self.ended = True
        elif kind == "error":
            error = event.get("error") or {}
            kind = str(error.get("type", "error"))
            raise AnswerProblem(
                f"failed mid-stream ({kind}: {error.get('message', '')})",
                code="upstream_stream_error",
                upstream_status=_ERROR_STATUSES.get(kind),
            )
        return []

    def _update_usage(self, usage: Any) -> None:
        """message_delta's counts are cumulative: the latest replaces what message_start said."""
        update = _usage(usage)
        if update is None:
            return
        current = self.usage or Usage()
        if usage.get("output_tokens") is not None:
            current.completion_tokens = update.completion_tokens
        if usage.get("input_tokens") is not None:
            current.prompt_tokens = update.prompt_tokens
        self.usage = current


def create(deployment: str, options: AnthropicOptions, credential: str | None) -> Provider:
    return TranslatedProvider(deployment, AnthropicAdapter(deployment, options, credential), credential, options)


def _finish(reason: Any, api: Api) -> FinishReason | None:
    """end_turn / stop_sequence → stop, max_tokens → length, refusal → content_filter, tool_use →
    tool_calls (for chat; completions never ask for tools); pause_turn and the rest → stop."""
    if reason == "tool_use" and api == "chat":
        return "tool_calls"
    return None if reason is None else _STOP_REASONS.get(str(reason), "stop")


def _usage(usage: Any) -> Usage | None:
    """Prompt tokens include those written to and read from Anthropic's prompt cache; those read
    are the prompt's cached tokens."""
    if not isinstance(usage, dict):
        return None
    prompt = sum(
        int(usage.get(name) or 0) for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    cached = usage.get("cache_read_input_tokens")
    return Usage(prompt, int(usage.get("output_tokens") or 0), cached_tokens=None if cached is None else int(cached))
