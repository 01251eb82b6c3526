"""The gateway's own response headers, named in one place for the handlers and the cache steps."""

from __future__ import annotations

from gateway.deployments import Deployment

DEPLOYMENT = "x-gateway-deployment"
PROVIDER = "x-gateway-provider"
ATTEMPTS = "x-gateway-attempts"
OVERHEAD_MS = "x-gateway-overhead-ms"
CACHE_STATUS = "x-gateway-cache-status"
REQUEST_ID = "x-request-id"


def served_by(deployment: Deployment, attempts: int) -> dict[str, str]:
    """Who answered, after how many upstream calls (0: the cache answered)."""
    return {DEPLOYMENT: deployment.name, PROVIDER: deployment.provider_type, ATTEMPTS: str(attempts)}


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"
