"""One Responses request bridged onto the chat API: the chat body sent upstream, and the `response`
object a chat completion is rendered as (plain here, streamed in `events`)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from gateway.api.errors import InvalidRequest
from gateway.api.responses.items import Item, Link, input_items, to_messages, write_back
from gateway.api.responses.request import ResponsesRequest
from gateway.api.responses.tools import (
    BridgedTools,
    bridge_tool_choice,
    bridge_tools,
    guarded_descriptions,
    named_back,
)

_RANDOM_BATCH = 4096  # bytes of randomness read at once: 256 ids per read of the OS's source


class _Ids:
    """128 random bits per id from the OS's cryptographic source (as `secrets` draws them), read
    a batch at a time rather than one system call per response."""

    def __init__(self) -> None:
        self._pool = b""
        self._at = 0

    def next(self) -> str:
        if self._at >= len(self._pool):
            self._pool, self._at = os.urandom(_RANDOM_BATCH), 0
        self._at += 16
        return self._pool[self._at - 16 : self._at].hex()


_ids = _Ids()


def new_id(prefix: str) -> str:
    return f"{prefix}_{_ids.next()}"


# The request's options the chat body carries, by their chat names.
_OPTIONS = (
    ("max_output_tokens", "max_completion_tokens"),
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("user", "user"),
    ("service_tier", "service_tier"),
)


@dataclass(slots=True)
class Bridge:
    request: ResponsesRequest
    items: list[Item]  # this request's own input items
    tools: BridgedTools
    id: str = field(default_factory=lambda: new_id("resp"))
    created_at: int = field(default_factory=lambda: int(time.time()))
    links: list[Link] = field(default_factory=list)  # this request's texts in the chat body
    _items: int = 0  # output item ids made so far
    # What the chat body holds of the instructions and `user` (a guardrail may redact them in place):
    # what the response echoes and what is stored.
    sent: dict[str, Any] = field(default_factory=dict)
    sent_body: dict[str, Any] = field(default_factory=dict)

    def item_id(self, prefix: str) -> str:
        """A new output item's id: unique as the response's own is (one random draw per response)."""
        self._items += 1
        return f"{prefix}_{self.id.removeprefix('resp_')}{self._items:04x}"

    @classmethod
    def of(cls, request: ResponsesRequest) -> Bridge:
        # The client's tools (parsed from this request's body: ours to change) are echoed and stored
        # with the descriptions the guardrails left.
        return cls(request, input_items(request.input), bridge_tools(request.tools))

    def chat_payload(self, history: list[Item]) -> dict[str, Any]:
        """The chat body: instructions as the system message, then the chain's items and this
        request's, tools and options as chat names them."""
        request = self.request
        messages = [{"role": "system", "content": request.instructions}] if request.instructions else []
        self.sent = messages[0] if messages else {}  # the instructions as the guardrails leave them
        names = self.tools.names() if self.tools.flattened else None  # namespaced tools: their flat names
        if history:
            messages += to_messages(history, names)
        messages += to_messages(self.items, names, self.links)
        if not messages:  # reasoning items alone: nothing a chat model reads
            raise InvalidRequest(
                "Invalid 'input': it holds nothing to send the model (reasoning items alone are not sent).",
                param="input",
                code="invalid_value",
            )
        payload: dict[str, Any] = {"model": request.model, "messages": messages}
        if self.tools.tools:
            payload["tools"] = self.tools.tools
            if request.parallel_tool_calls is not None:
                payload["parallel_tool_calls"] = request.parallel_tool_calls
        choice = bridge_tool_choice(request.tool_choice, self.tools)
        if choice is not None:
            payload["tool_choice"] = choice
        for ours, theirs in _OPTIONS:
            value = getattr(request, ours)
            if value is not None:
                payload[theirs] = value
        self.sent_body = payload  # `user` as the guardrails leave it
        if request.top_logprobs is not None:
            payload.update(logprobs=True, top_logprobs=request.top_logprobs)
        if request.reasoning is not None and request.reasoning.effort is not None:
            payload["reasoning_effort"] = request.reasoning.effort
        response_format = _response_format(request)
        if response_format is not None:
            payload["response_format"] = response_format
        if request.stream:
            payload["stream"] = True
            payload["stream_options"] = {"include_usage": True}
        return payload

    def guarded_items(self) -> list[Item]:
        """This request's input items as the input guardrails left the chat body (redactions kept)."""
        write_back(self.links)
        guarded_descriptions(self.tools)
        return self.items

    def _echoed_tools(self) -> list[Any]:
        guarded_descriptions(self.tools)
        return self.request.tools or []

    def skeleton(self, status: str) -> dict[str, Any]:
        """The `response` object without output and usage: what `response.created` carries."""
        request = self.request
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": self.sent.get("content", request.instructions),
            "max_output_tokens": request.max_output_tokens,
            "max_tool_calls": request.max_tool_calls,
            "model": request.model,
            "output": [],
            "parallel_tool_calls": request.parallel_tool_calls is not False,
            "previous_response_id": request.previous_response_id,
            "reasoning": {"effort": request.reasoning.effort if request.reasoning else None, "summary": None},
            "store": request.store is not False,
            "temperature": 1.0 if request.temperature is None else request.temperature,
            "text": {"format": (request.text.format if request.text else None) or {"type": "text"}},
            "tool_choice": request.tool_choice or "auto",
            "tools": self._echoed_tools(),
            "top_p": 1.0 if request.top_p is None else request.top_p,
            "truncation": request.truncation or "disabled",
            "usage": None,
            "user": self.sent_body.get("user", request.user),
            "metadata": request.metadata or {},
        }

    def response(self, chat: dict[str, Any]) -> dict[str, Any]:
        """A chat completion as a finished `response`."""
        choices = chat.get("choices") or [{}]
        choice = choices[0] if isinstance(choices[0], dict) else {}
        message = choice.get("message") or {}
        finish = choice.get("finish_reason")
        # Cut short (max tokens, a filter): the last item is the one cut, a message before calls is whole.
        done = finish not in ("length", "content_filter") or bool(message.get("tool_calls"))
        output = self.output_of(message, done)
        answer = finished(self.skeleton("completed"), output, usage(chat.get("usage")), finish)
        if isinstance(chat.get("model"), str):
            answer["model"] = chat["model"]
        return answer

    def output_of(self, message: dict[str, Any], done: bool) -> list[Item]:
        output: list[Item] = []
        thought = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(thought, str) and thought:
            output.append(reasoning_item(self.item_id("rs"), thought))
        content, refusal = message.get("content"), message.get("refusal")
        if (isinstance(content, str) and content) or (isinstance(refusal, str) and refusal):
            part = output_part(content if isinstance(content, str) and content else None, refusal)
            output.append(message_item(self.item_id("msg"), [part], "completed" if done else "incomplete"))
        for call in message.get("tool_calls") or []:
            output.append(self.call_item(self.item_id("fc"), call))
        return output

    def call_item(self, item_id: str, call: dict[str, Any]) -> Item:
        if call.get("type") == "custom":
            custom = call.get("custom") or {}
            named = named_back(str(custom.get("name", "")), self.tools.flattened)
            return {
                "id": item_id,
                "type": "custom_tool_call",
                "call_id": call.get("id", ""),
                "input": custom.get("input", ""),
                "status": "completed",
                **named,
            }
        function = call.get("function") or {}
        named = named_back(str(function.get("name", "")), self.tools.flattened)
        return {
            "id": item_id,
            "type": "function_call",
            "call_id": call.get("id", ""),
            "arguments": function.get("arguments") or "",
            "status": "completed",
            **named,
        }


def _response_format(request: ResponsesRequest) -> dict[str, Any] | None:
    found = request.text.format if request.text is not None else None
    if found is None or found["type"] == "text":
        return None
    if found["type"] == "json_object":
        return {"type": "json_object"}
    schema = {key: found[key] for key in ("name", "schema", "description", "strict") if found.get(key) is not None}
    return {"type": "json_schema", "json_schema": schema}


def output_part(text: str | None, refusal: str | None) -> dict[str, Any]:
    if text is None and refusal:
        return {"type": "refusal", "refusal": refusal}
    return {"type": "output_text", "text": text or "", "annotations": [], "logprobs": []}


def message_item(item_id: str, content: list[dict[str, Any]], status: str) -> Item:
    return {"id": item_id, "type": "message", "role": "assistant", "status": status, "content": content}


def reasoning_item(item_id: str, text: str) -> Item:
    return {"id": item_id, "type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": text}]}


def finished(answer: dict[str, Any], output: list[Any], used: dict[str, Any], finish: Any) -> dict[str, Any]:
    """`answer` completed with its output (items, or items encoded: `orjson.Fragment`), usage and
    status (incomplete when the chat stopped short)."""
    answer["output"] = output
    answer["usage"] = used
    if finish == "length":
        answer["status"] = "incomplete"
        answer["incomplete_details"] = {"reason": "max_output_tokens"}
    elif finish == "content_filter":
        answer["status"] = "incomplete"
        answer["incomplete_details"] = {"reason": "content_filter"}
    else:
        answer["status"] = "completed"
        answer["completed_at"] = int(time.time())
    return answer


def usage(chat_usage: Any) -> dict[str, Any]:
    """Chat usage as the Responses API counts it (cached and reasoning tokens in their details)."""
    found = chat_usage if isinstance(chat_usage, dict) else {}
    prompt = _count(found.get("prompt_tokens"))
    completion = _count(found.get("completion_tokens"))
    cached = _count((found.get("prompt_tokens_details") or {}).get("cached_tokens"))
    reasoning = _count((found.get("completion_tokens_details") or {}).get("reasoning_tokens"))
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": _count(found.get("total_tokens")) or prompt + completion,
    }


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


# A chat field a deployment refused, by the name the Responses request gave it.
RESPONSES_NAMES = {
    "response_format": "text.format",
    "max_completion_tokens": "max_output_tokens",
    "reasoning_effort": "reasoning.effort",
    "logprobs": "top_logprobs",
    "messages": "input",
}


def responses_param(param: str) -> str:
    """`param` of an error raised on the chat body, as the Responses body names it."""
    head, dot, rest = param.partition(".")
    name, bracket, index = head.partition("[")
    renamed = RESPONSES_NAMES.get(name)
    if renamed is None or (name == "messages" and bracket):  # messages[i] is not input[i] (instructions, merges)
        return "input" if name == "messages" else param
    return renamed + (bracket + index if bracket else "") + (dot + rest if dot else "")
