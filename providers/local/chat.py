"""A Chat Completions body as the engine's work: the messages go through the model's chat template
(when the request is tokenised), then the same sampling path and batching as a completion.

What the engine cannot honour is a 400 naming the field: a model without a chat template, content
other than text (images, audio, files), tools (a model's tool calls cannot be told from its
text) and JSON response formats (no constrained decoding). With no `max_completion_tokens` (or
`max_tokens`) the answer may run to the end of the context, within the deployment's bounds. A
special token's spelling in a message is text (`chat_tokens`): only the template writes turns.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gateway.api.errors import InvalidRequest
from providers.chat.params import CHAT, max_completion_tokens, top_logprobs
from providers.completion_params import Rule, check_params, choices_per_prompt, include_usage, supported
from providers.local.loader import LoadedModel
from providers.local.request_plan import (
    ENGINE,
    Conversation,
    Draft,
    _least_tokens,
    _sampling,
    _too_long_text,
)
from providers.request_bounds import RequestLimits, chat_names, check_sequences, check_tokens

_RULES: dict[str, Rule] = {
    **dict.fromkeys(
        ("frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "top_logprobs", "seed", "user"), supported
    ),
    "tools": lambda value, body: "it cannot tell a model's tool calls from its text" if value else None,
    "response_format": lambda value, body: (
        None if value in (None, {"type": "text"}) else "it has no constrained (JSON) decoding"
    ),
}


def check_chat(
    body: dict[str, Any], model: LoadedModel, *, deployment: str, drop: list[str], limits: RequestLimits
) -> Draft:
    """What can be refused without templating and tokenising; cheap whatever the body holds."""
    body = check_params(body, _RULES, drop=drop, deployment=deployment, api=ENGINE, reference=CHAT)
    if not getattr(model.tokenizer, "chat_template", None):
        raise InvalidRequest(
            f"The model of deployment '{deployment}' has no chat template, so it cannot take chat messages: "
            "use /v1/completions with a prompt, or serve a model whose tokenizer has a chat_template.",
            param="messages",
            code="chat_template_missing",
        )
    conversation = Conversation(tuple(_message(message, i) for i, message in enumerate(body.get("messages") or [])))
    limit = max_completion_tokens(body, None)
    params = replace(_sampling(body, model.vocab_size), max_tokens=1 if limit is None else limit)
    params = replace(params, logprobs=top_logprobs(body))
    n = choices_per_prompt(body)
    with chat_names():
        check_sequences(1, n, None, n, limits.sequences)
        fewest = _least_tokens(conversation.text, model)
        if fewest >= model.context_length:  # cannot fit whatever the limit: the exact checks follow tokenising
            raise _too_long_text(model, len(conversation.text.encode("utf-8", "surrogatepass")), fewest)
        check_tokens(fewest, params.max_tokens * n, limits.tokens, exact=False)
    return Draft(
        items=(conversation,),
        suffix=None,
        samples=n,
        n=n,
        params=params,
        model=str(body.get("model")),
        stream=bool(body.get("stream")),
        include_usage=include_usage(body),
        open_ended=limit is None,
        api="chat",
    )


def _message(message: dict[str, Any], i: int) -> dict[str, Any]:
    """A message as chat templates read it: its content as one text (parts joined)."""
    content = message.get("content")
    if isinstance(content, list):
        pieces = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") not in ("text", "refusal"):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise InvalidRequest(
                    f"The local engine reads text only, not '{kind}' content.",
                    param=f"messages[{i}].content[{j}]",
                    code="unsupported_parameter",
                )
            pieces.append(str(part.get("text", part.get("refusal", ""))))
        content = "".join(pieces)
    shaped = {"role": str(message.get("role")), "content": "" if content is None else str(content)}
    for name in ("name", "tool_calls", "tool_call_id"):  # templates that know tools read these
        if message.get(name) is not None:
            shaped[name] = message[name]
    return shaped
