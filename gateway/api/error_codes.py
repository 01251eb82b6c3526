"""Every `error.code` this gateway writes, with the status it comes with, what it means and what the
caller can do: the source of docs/reference/errors.md (scripts/docs_reference.py).

`tests/test_docs_reference.py` reads every `code="..."` the packages raise and fails when one is
missing here, so the reference cannot fall behind the code. An upstream's own 4xx keeps the
upstream's code (its `param` and message too): those are the provider's words, not listed here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ErrorCode:
    status: int  # the HTTP status it comes with (the Anthropic and Responses edges map it to their types)
    meaning: str
    action: str


def _code(status: int, meaning: str, action: str) -> ErrorCode:
    return ErrorCode(status, meaning, action)


ERROR_CODES: dict[str, ErrorCode] = {
    # The request itself.
    "invalid_json": _code(400, "The body is not JSON, or not a JSON object.", "Send a JSON object."),
    "invalid_encoding": _code(400, "The body is not UTF-8.", "Encode the body as UTF-8."),
    "unsupported_media_type": _code(
        415, "The body is not `application/json`.", "Send `Content-Type: application/json`."
    ),
    "invalid_value": _code(
        400, "A field has a wrong type or value; `param` names it.", "Fix the field `param` names, as the message says."
    ),
    "invalid_header": _code(400, "A gateway header has a wrong value; `param` names it.", "Fix that header."),
    "invalid_http": _code(400, "The HTTP request is malformed.", "Use a conforming HTTP client."),
    "method_not_allowed": _code(405, "The path does not take this HTTP method.", "Use the method the API documents."),
    "request_timeout": _code(
        408,
        "The headers or the body arrived too slowly (`server.header_timeout_s`, `server.body_timeout_s`).",
        "Send the request whole and promptly; check the client's network.",
    ),
    "request_too_large": _code(
        400,
        "The body, a field or the number of texts to check is beyond a bound (413 for a body over "
        "`server.max_body_bytes`); the message names the bound.",
        "Send less, or raise the bound the message names.",
    ),
    "unsupported_parameter": _code(
        400,
        "The deployment cannot honour this field (it is never silently dropped); `param` names it.",
        "Leave the field out, or route to a deployment that supports it.",
    ),
    "unsupported_background": _code(
        400, "Responses API: background mode is not offered by this gateway.", "Leave out `background: true`."
    ),
    "context_length_exceeded": _code(
        400,
        "A local model: the prompt and `max_tokens` exceed its context length.",
        "Shorten the prompt or lower `max_tokens`.",
    ),
    "chat_template_missing": _code(
        400,
        "A local model without a chat template was sent chat messages.",
        "Use /v1/completions, or serve a model whose tokenizer has a chat template.",
    ),
    "not_found": _code(
        404, "The path or the object (a stored response, a key) does not exist.", "Check the id or path."
    ),
    # Who is calling.
    "missing_api_key": _code(
        401,
        "No API key in `Authorization: Bearer`, `x-gateway-api-key` or `x-api-key`.",
        "Send one of the configured keys.",
    ),
    "invalid_api_key": _code(401, "The API key is not one of this gateway's.", "Check the key; it may be rotated."),
    "expired_api_key": _code(401, "The API key is past its `expires_at`.", "Ask the operator for a new key."),
    "revoked_api_key": _code(401, "The API key was revoked.", "Ask the operator for a new key."),
    "too_many_auth_failures": _code(
        429,
        "Too many failed authentications from this address; `retry-after` says for how long.",
        "Wait, then retry with a valid key.",
    ),
    "missing_admin_key": _code(401, "An admin route without the admin key.", "Send it as a bearer token."),
    "invalid_admin_key": _code(401, "The admin key is wrong.", "Check `admin.key`'s environment variable."),
    "deployment_not_allowed": _code(
        403, "The key may not use this deployment (`allowed_deployments`).", "Use an allowed deployment."
    ),
    "virtual_key_not_allowed": _code(
        403, "The key may not use the virtual key it named.", "Name a virtual key the key's `virtual_keys` allows."
    ),
    "unknown_virtual_key": _code(400, "The named virtual key is unknown or revoked.", "Check the virtual key's name."),
    "virtual_key_provider_mismatch": _code(
        400,
        "The virtual key holds another provider's credential than the deployment needs.",
        "Name a virtual key of the deployment's provider.",
    ),
    # Which deployment.
    "model_not_found": _code(
        404, "`model` names no deployment or alias.", "Use a name from GET /v1/models, or add an alias."
    ),
    "deployment_not_found": _code(
        404, "The routing header names no deployment, or no deployment carries the tags.", "Check the header's value."
    ),
    "unsupported_api": _code(
        400, "The deployment does not serve this API (its `apis:` or its provider).", "Route to one that does."
    ),
    "deployment_unavailable": _code(
        503,
        "Every candidate deployment is unavailable (circuit open, draining, or failed); `retry-after` when known.",
        "Retry later; operators: see /ready and the deployments' state.",
    ),
    # Policies.
    "rate_limit_exceeded": _code(
        429,
        "A key or deployment rate limit (rpm, tpm, concurrency) is reached; `retry-after` says when to retry.",
        "Retry after the time given, or ask for a higher limit.",
    ),
    "budget_exceeded": _code(
        429, "The key's token or dollar budget for the period is spent.", "Wait for the next period or a higher budget."
    ),
    "limits_unavailable": _code(
        503,
        "The limits store (Redis) failed and `limits.on_redis_error` is `closed`.",
        "Retry; operators: check Redis.",
    ),
    "guardrail_violation": _code(
        400,
        "A guardrail denied the request (an answer's deny has the status its policy sets); the check is "
        "named, the offending text never.",
        "Change the prompt; operators: see the policy's checks.",
    ),
    # The upstream.
    "bad_gateway": _code(502, "The upstream failed.", "Retry; operators: see the access log's attempts."),
    "upstream_http_error": _code(
        502, "The upstream answered with a 5xx (or a status the gateway does not pass through).", "Retry later."
    ),
    "upstream_timeout": _code(504, "The upstream did not answer in time.", "Retry; operators: see `timeout_s`."),
    "upstream_unreachable": _code(502, "The upstream could not be connected to.", "Operators: check `base_url`."),
    "upstream_redirect": _code(
        502, "The upstream answered with a redirect, which the gateway never follows.", "Operators: fix `base_url`."
    ),
    "upstream_malformed": _code(502, "The upstream's answer could not be parsed.", "Operators: check the upstream."),
    "upstream_truncated": _code(502, "The upstream's answer ended early.", "Retry."),
    "upstream_response_too_large": _code(
        502, "The upstream's answer is beyond the gateway's bound.", "Ask for less (`max_tokens`, `n`)."
    ),
    "upstream_event_too_large": _code(502, "One streamed event of the upstream is beyond the bound.", "Retry."),
    "upstream_stream_error": _code(
        502, "The upstream's stream failed after it started (sent as an error event).", "Retry the request."
    ),
    "too_many_upstream_calls": _code(
        400,
        "The request needs more upstream calls than `provider.max_fanout` allows.",
        "Send fewer prompts, or a lower `n`.",
    ),
    # The local engine.
    "engine_overloaded": _code(429, "The local engine's queue is full.", "Retry after `retry-after`."),
    "local_model_unavailable": _code(503, "The local model could not be loaded.", "Operators: check the model folder."),
    "local_engine_error": _code(500, "The local engine failed on this batch.", "Retry; operators: see the log."),
    # The gateway.
    "internal_error": _code(500, "A bug in the gateway (logged with the request id).", "Report the request id."),
    "shutting_down": _code(503, "The gateway is draining for a shutdown.", "Retry on another replica."),
    "storage_unavailable": _code(
        503, "Responses API: the response store (Redis) failed.", "Retry; operators: check Redis."
    ),
    "metrics_local_only": _code(
        403,
        "/metrics answers only local clients until `observability.metrics.key` is set.",
        "Operators: set the metrics key or port.",
    ),
    # The admin API, the request log and the console.
    "request_log_disabled": _code(
        404, "The request log is off on this gateway (`request_log.enabled: false`).", "Operators: turn it on."
    ),
    "request_log_unavailable": _code(503, "The request log's database did not answer.", "Retry; check the database."),
    "no_session": _code(401, "A console request without a session cookie.", "Sign in at /console."),
    "invalid_session": _code(401, "The console session cookie is not one this gateway signed.", "Sign in again."),
    "session_expired": _code(
        401, "The console session is past `admin.session_ttl_s`, or its key changed.", "Sign in again."
    ),
    "csrf_failed": _code(
        403, "A console change without the session's CSRF token (x-gateway-csrf): nothing changed.", "Reload the page."
    ),
    "read_only_viewer": _code(403, "A viewer key or session may only read.", "Sign in with the admin key."),
    "already_exists": _code(409, "A key or virtual key of that name exists.", "Choose another name, or rotate it."),
    "unknown_provider": _code(400, "A virtual key names a provider type that does not exist.", "Check `provider`."),
    "usage_not_tracked": _code(404, "This gateway keeps no usage (no limits configured).", "Configure limits."),
    "key_store_read_only": _code(
        400, "Keys defined in config.yaml cannot be changed through the API.", "Edit config.yaml instead."
    ),
    "key_store_unavailable": _code(503, "The key store (Redis) failed.", "Retry; operators: check Redis."),
    "encryption_key_missing": _code(
        503,
        "Virtual keys need `GATEWAY_ENCRYPTION_KEY`, which is not set.",
        "Operators: set it (a Fernet key) on every replica.",
    ),
    "encryption_key_invalid": _code(
        503,
        "`GATEWAY_ENCRYPTION_KEY` cannot decrypt what is stored.",
        "Operators: set the key the values were stored with (or a key list while rotating).",
    ),
}
