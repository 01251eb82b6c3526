"""Which deployments are sent a request's own body (native pass-through).

The pipeline reads the chat view of a native request (input guards, limits, routing) and of its
answer (usage); the body itself goes to a deployment whose provider speaks its API, with what the
pipeline did to the chat view written into it (an input redaction: `redaction`), and its answer
is checked where it is (`answer`, `events`) and cached as it is (`policies.cache.native_events`).
"""

from __future__ import annotations

from gateway.routing.deployments import Deployment

# The provider types that send a request's own body (`NativeRequest`) as it came, and answer in its API.
NATIVE_PROVIDERS = frozenset({"anthropic"})


def sends_native(deployment: Deployment) -> bool:
    """Whether `deployment` is sent a native request's own body (and answers in its API's shape)."""
    return deployment.provider_type in NATIVE_PROVIDERS
