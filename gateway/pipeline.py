"""The one object that owns the order of a completion request: auth, validate, route, call.

HTTP handlers stay thin (read the body, call the pipeline, render), so the flow is testable
without a socket and later stages (guardrails, cache, limits) slot in here in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.auth import KeyAuthenticator, Principal
from gateway.errors import DeploymentUnavailable, PermissionDenied
from gateway.request_parsing import validate_completion
from gateway.routing import Router
from providers.base import CompletionResult, CompletionStream, Provider, UpstreamRequest


@dataclass(frozen=True, slots=True)
class Deployment:
    """A deployment as served: its provider, or why it cannot serve."""

    name: str
    provider_type: str
    timeout_s: float
    provider: Provider | None
    unavailable: str | None = None


@dataclass(frozen=True, slots=True)
class PreparedCall:
    deployment: Deployment
    upstream: UpstreamRequest
    stream: bool


class Pipeline:
    def __init__(self, authenticator: KeyAuthenticator, router: Router, deployments: dict[str, Deployment]) -> None:
        self.authenticator = authenticator
        self.router = router
        self.deployments = deployments

    def authenticate(self, headers: Mapping[str, str]) -> Principal:
        return self.authenticator.authenticate(headers)

    def prepare(
        self, principal: Principal, headers: Mapping[str, str], payload: dict[str, Any], request_id: str
    ) -> PreparedCall:
        """Validate the body and choose the deployment; raises the 4xx/503 the client should get."""
        request = validate_completion(payload)
        name = self.router.resolve(headers, request.model)
        if not principal.may_use(name):
            raise PermissionDenied(f"This API key may not use the deployment '{name}'.", param="model")
        deployment = self.deployments[name]
        if deployment.provider is None:
            # The reason (which variable is unset) is for operators: start-up log and /ready.
            raise DeploymentUnavailable(
                f"The deployment '{name}' is not available: its provider credential is not configured on the "
                "gateway. Other deployments keep serving."
            )
        upstream = UpstreamRequest(body=payload, request_id=request_id, timeout_s=deployment.timeout_s)
        return PreparedCall(deployment=deployment, upstream=upstream, stream=bool(request.stream))

    async def complete(self, call: PreparedCall) -> CompletionResult:
        assert call.deployment.provider is not None  # prepare() guarantees it
        return await call.deployment.provider.complete(call.upstream)

    async def open_stream(self, call: PreparedCall) -> CompletionStream:
        assert call.deployment.provider is not None
        return await call.deployment.provider.stream(call.upstream)

    def models_for(self, principal: Principal) -> list[tuple[str, Deployment]]:
        """(model id, deployment) for every name and alias the caller may use and that can serve."""
        return [
            (model, deployment)
            for deployment in self.deployments.values()
            if deployment.provider is not None and principal.may_use(deployment.name)
            for model in self.router.names_for(deployment.name)
        ]
