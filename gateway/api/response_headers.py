"""The gateway's own response headers, named in one place for the handlers and the cache steps."""

from __future__ import annotations

DEPLOYMENT = "x-gateway-deployment"
PROVIDER = "x-gateway-provider"
ATTEMPTS = "x-gateway-attempts"
OVERHEAD_MS = "x-gateway-overhead-ms"
CACHE_STATUS = "x-gateway-cache-status"
REQUEST_ID = "x-request-id"
# Fields of a translated request that its upstream was not sent ("context_management,thinking").
IGNORED_FIELDS = "x-gateway-ignored-fields"
# Candidates passed over, and why: "instruct=credential_unset, eu-1=circuit_open" (names hold no ",", "=", " ").
SKIPPED = "x-gateway-skipped"


def served_by(deployment: str, provider_type: str, attempts: int) -> dict[str, str]:
    """Who answered, after how many upstream calls (0: the cache answered)."""
    return {DEPLOYMENT: deployment, PROVIDER: provider_type, ATTEMPTS: str(attempts)}


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def skipped_value(skipped: dict[str, str]) -> str:
    """`SKIPPED`'s value from {deployment: reason}, in the order they were passed over."""
    return ", ".join(f"{name}={reason}" for name, reason in skipped.items())


def parse_skipped(value: str) -> dict[str, str]:
    """The inverse of `skipped_value` (for the access log); malformed parts are left out."""
    pairs = (part.strip().partition("=") for part in value.split(","))
    return {name: reason for name, sep, reason in pairs if sep and name and reason}
