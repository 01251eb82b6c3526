"""Translate an upstream's HTTP error answer (or redirect) into a `GatewayError`, with no credential
in it: every field the upstream wrote passes through the scrubber (`providers.upstream.scrubbing`) before it
is cut to length, so that neither the client, nor a log line, nor the access log sees a secret."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import orjson
from yarl import URL

from gateway.api.errors import GatewayError, UpstreamError, UpstreamRejected
from providers.upstream.scrubbing import Secrets, SecretSet, cut, scrub_text

_PASSTHROUGH_HEADERS = ("retry-after", "retry-after-ms")
# What a Retry-After (seconds, milliseconds, or an HTTP date) may be; anything else is not relayed.
_RETRY_VALUE = re.compile(
    r"^(?:\d{1,10}(?:\.\d{1,6})?|[A-Za-z]{3}, \d{1,2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT)$", re.ASCII
)
# Of a non-JSON body: this much is scrubbed, then cut to _SNIPPET_CHARS. A secret at either cut is
# matched by its 8-character windows, so at most 7 of its characters can be left there.
_SCAN_BYTES = 512
_SNIPPET_CHARS = 300
_MESSAGE_CHARS = 2000
_FIELD_CHARS = 200  # type, param, code

SecretsLike = Secrets | Sequence[str]


def scrub(text: str, secrets: SecretsLike = ()) -> str:
    """`text` without the given secrets (and the request's, see `providers.upstream.scrubbing`), nor anything
    shaped like an API key."""
    return scrub_text(text, _sets(secrets))


def upstream_status_error(
    status: int,
    raw: bytes,
    headers: dict[str, str],
    *,
    deployment: str,
    secrets: SecretsLike,
) -> GatewayError:
    """4xx pass through with their status and (scrubbed) fields; 5xx (and anything odd) become 502."""
    sets = _sets(secrets)
    fields = _error_fields(raw)
    message = _field(fields.get("message"), sets, _MESSAGE_CHARS) or _snippet(raw, sets) or f"HTTP {status}"
    kept = {name: headers[name].strip() for name in _PASSTHROUGH_HEADERS if name in headers}
    kept = {name: value for name, value in kept.items() if _RETRY_VALUE.match(value)}
    if 400 <= status < 500:
        return UpstreamRejected(
            message,
            status=status,
            type=_field(fields.get("type"), sets, _FIELD_CHARS) or "invalid_request_error",
            param=_field(fields.get("param"), sets, _FIELD_CHARS),
            code=_field(fields.get("code"), sets, _FIELD_CHARS),
            headers=kept,
            upstream_status=status,
        )
    return UpstreamError(
        f"The upstream of deployment '{deployment}' failed with HTTP {status}: {message}",
        code="upstream_http_error",
        headers=kept,  # a 503's Retry-After also tells the client (and the retry loop) when to come back
        upstream_status=status,
    )


def upstream_redirect(
    status: int, location: str | None, url: str, *, deployment: str, secrets: SecretsLike
) -> UpstreamError:
    """A 3xx is never followed (the credential would go with it): 502 naming the deployment and
    only the origin (scheme://host:port) it pointed to, scrubbed. Not retried: it would redirect again."""
    target = "without a Location"
    if location:
        target = f"to {scrub_text(redirect_origin(location, url), _sets(secrets))}"
    return UpstreamError(
        f"The upstream of deployment '{deployment}' answered HTTP {status}, a redirect {target}. "
        "The gateway does not follow upstream redirects, so that no credential reaches another origin: "
        "set the deployment's address to the one the API answers on.",
        code="upstream_redirect",
        upstream_status=status,
    )


def redirect_origin(location: str, url: str) -> str:
    """scheme://host:port of where a redirect points (resolved against the request's URL)."""
    try:
        target = URL(url).join(URL(location.strip()))
        host, port = target.host, target.port
    except (ValueError, TypeError):
        return "an unparsable URL"
    if not target.scheme or not host:
        return "an unparsable URL"
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"{target.scheme}://{host}" if port is None else f"{target.scheme}://{host}:{port}"


def _sets(secrets: SecretsLike) -> Sequence[SecretSet]:
    if isinstance(secrets, Secrets):
        return secrets.sets()
    return (SecretSet.of(secrets),)


def _error_fields(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return error
        if isinstance(error, str):  # vLLM, TGI and llama.cpp variants
            return {"message": error}
        if isinstance(body.get("message"), str):
            return {"message": body["message"]}
    return {}


def _field(value: Any, sets: Sequence[SecretSet], limit: int) -> str | None:
    """An upstream field as text, scrubbed, then cut (never cut first: a secret straddling the cut
    would survive as a fragment)."""
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    return cut(scrub_text(text[: limit * 2], sets), limit) or None


def _snippet(raw: bytes, sets: Sequence[SecretSet]) -> str:
    text = raw[:_SCAN_BYTES].decode("utf-8", "replace").strip()
    return cut(scrub_text(text, sets), _SNIPPET_CHARS)
