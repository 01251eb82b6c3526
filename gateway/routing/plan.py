"""Turn a request into a route plan: who may serve it, in which order of tiers.

Selection, most specific first: `x-gateway-deployment` (a name or an alias), then
`x-gateway-tags`, then the body's `model` (a name, or an alias shared by a group). The first
tier is what was asked for; the tiers after it are its fallbacks, in order.

Only deployments that serve the request's API (`Deployment.apis`: completions, chat) are in the
plan; the others are passed over (`api_unserved` in `x-gateway-skipped`). When none of what was
asked for serves it, the answer is a 400 naming the deployments and why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from gateway.api.credentials import Principal
from gateway.api.errors import InvalidRequest, NotFound, PermissionDenied
from gateway.config.routing import RoutingConfig, Strategy, TagsMatch
from gateway.routing.deployments import API_UNSERVED, Deployment
from providers.base import APIS, Api

API_PATHS: dict[Api, str] = {
    "completions": "/v1/completions",
    "chat": "/v1/chat/completions",
    "embeddings": "/v1/embeddings",
}

DEPLOYMENT_HEADERS = ("x-gateway-deployment", "x-enkrypt-deployment")
TAGS_HEADERS = ("x-gateway-tags", "x-enkrypt-tags")
_CHOOSING_HEADERS = (*DEPLOYMENT_HEADERS, *TAGS_HEADERS)


@dataclass(frozen=True, slots=True)
class Tier:
    """Deployments that may serve one step of the plan, and how to choose among them."""

    members: tuple[Deployment, ...]
    strategy: Strategy
    key: tuple[str, ...]  # identifies the group for round-robin turns


@dataclass(frozen=True, slots=True)
class RoutePlan:
    asked: str  # what the client asked for, for messages: "deployment 'a'", "tags 'x, y'"
    target: str  # what was resolved, stable across requests: a deployment name, "alias:NAME" or "tags:a,b"
    tiers: tuple[Tier, ...]
    tags: tuple[str, ...] = ()  # the request's tags, kept as labels when a name decided
    passed_over: tuple[tuple[Deployment, str], ...] = ()  # left out before any attempt, and why (API_UNSERVED)


class Router:
    def __init__(self, deployments: Mapping[str, Deployment], routing: RoutingConfig, aliases: Mapping[str, list[str]]):
        """`aliases`: deployment name -> its aliases (config order)."""
        self._deployments = deployments
        self._routing = routing
        self._groups: dict[str, tuple[str, ...]] = {}
        for name, names in aliases.items():
            for alias in names:
                self._groups[alias] = (*self._groups.get(alias, ()), name)
        self._group_settings = {group.alias: group for group in routing.groups}
        # The APIs every deployment serves: requests on them need no filtering (the usual case).
        self._served_by_all = frozenset(APIS.intersection(*(d.apis for d in deployments.values())))
        # (model, API) -> its plan, for a caller that may use every deployment and names no
        # deployment or tags by header (the usual request): a plan is immutable and depends on
        # nothing else, so it is made once per config. Bounded by the names the config defines.
        self._by_model: dict[tuple[str, Api], RoutePlan] = {}

    def plan(self, headers: Mapping[str, str], model: str, principal: Principal, api: Api = "completions") -> RoutePlan:
        reusable = principal.may_use_all
        for name in _CHOOSING_HEADERS:  # a loop, not any(): a generator costs a call per header
            if name in headers:
                reusable = False
        if reusable:
            cached = self._by_model.get((model, api))
            if cached is not None:
                return cached
        plan = self._plan(headers, model, principal)
        if api not in self._served_by_all:
            plan = _serving(plan, api, _param(headers))
        if reusable:
            self._by_model[model, api] = plan  # only a known name gets this far
        return plan

    def _plan(self, headers: Mapping[str, str], model: str, principal: Principal) -> RoutePlan:
        tags, tags_header = _tags(headers)
        for header in DEPLOYMENT_HEADERS:
            wanted = (headers.get(header) or "").strip()
            if wanted:
                if not self._known(wanted):
                    raise NotFound(  # the value is not quoted: no header's value ever appears in a response
                        f"The deployment named by the {header} header does not exist (see GET /v1/models).",
                        param=header,
                        code="deployment_not_found",
                    )
                return self._plan_for(wanted, principal, f"deployment '{wanted}'", tags, param=header)
        if tags:
            return self._plan_for_tags(tags, tags_header, principal)
        if not self._known(model):
            raise NotFound(
                f"The model '{model}' does not exist or you do not have access to it: it names no deployment "
                f"or alias of this gateway (see GET /v1/models).",
                param="model",
                code="model_not_found",
            )
        return self._plan_for(model, principal, f"model '{model}'", (), param="model")

    def names_for(self, deployment: str) -> list[str]:
        """The deployment's name followed by its aliases."""
        return [deployment, *(alias for alias, names in self._groups.items() if deployment in names)]

    def _known(self, name: str) -> bool:
        return name in self._deployments or name in self._groups

    def _plan_for(self, name: str, principal: Principal, asked: str, tags: tuple[str, ...], *, param: str) -> RoutePlan:
        """`param`: where the name came from (a header or `model`), for the 403's `param`."""
        first = self._tier(name)
        allowed = _allowed(first, principal)
        if allowed is None:
            raise PermissionDenied(f"This API key may not use the {asked}.", param=param)
        target = name if name in self._deployments else f"alias:{name}"
        return RoutePlan(asked, target, self._with_fallbacks(allowed, self._fallbacks_of(name), principal), tags)

    def _plan_for_tags(self, tags: tuple[str, ...], header: str, principal: Principal) -> RoutePlan:
        wanted = set(tags)
        match_all = self._routing.tags_match is TagsMatch.ALL
        members = tuple(d for d in self._deployments.values() if (wanted <= d.tags if match_all else wanted & d.tags))
        # Only tags some deployment carries are quoted back: the others are the client's own text.
        shown = ", ".join(tag for tag in tags if any(tag in d.tags for d in members))
        if not members:
            raise NotFound(
                f"No deployment carries {'all' if match_all else 'any'} of the tags named by the {header} header.",
                param=header,
                code="deployment_not_found",
            )
        allowed = _allowed(Tier(members, self._routing.strategy, ("tags", *tags)), principal)
        if allowed is None:
            raise PermissionDenied(f"This API key may use none of the deployments tagged '{shown}'.", param=header)
        fallbacks = _ordered_union(d.fallbacks for d in members)
        target = f"tags:{','.join(sorted(tags))}"
        return RoutePlan(f"tags '{shown}'", target, self._with_fallbacks(allowed, fallbacks, principal), tags)

    def _tier(self, name: str) -> Tier:
        if name in self._deployments:
            return Tier((self._deployments[name],), self._routing.strategy, (name,))
        settings = self._group_settings.get(name)
        strategy = settings.strategy if settings and settings.strategy else self._routing.strategy
        return Tier(tuple(self._deployments[n] for n in self._groups[name]), strategy, ("alias", name))

    def _fallbacks_of(self, name: str) -> tuple[str, ...]:
        if name in self._deployments:
            return self._deployments[name].fallbacks
        settings = self._group_settings.get(name)
        if settings and settings.fallbacks:
            return tuple(settings.fallbacks)
        return _ordered_union(self._deployments[n].fallbacks for n in self._groups[name])

    def _with_fallbacks(self, first: Tier, fallbacks: Iterable[str], principal: Principal) -> tuple[Tier, ...]:
        """Fallbacks one level deep (a fallback's own fallbacks are not followed: no cycles), each
        deployment in its first tier only, those the key may not use left out."""
        tiers = [first]
        seen = {d.name for d in first.members}
        for name in fallbacks:
            tier = _allowed(self._tier(name), principal, exclude=seen)
            if tier is not None:
                tiers.append(tier)
                seen.update(d.name for d in tier.members)
        return tuple(tiers)


def _serving(plan: RoutePlan, api: Api, param: str) -> RoutePlan:
    """The plan without the deployments that do not serve `api`; a 400 when none of the first tier does."""
    tiers: list[Tier] = []
    passed: list[tuple[Deployment, str]] = []
    for position, tier in enumerate(plan.tiers):
        members = tuple(d for d in tier.members if api in d.apis)
        passed += [(d, API_UNSERVED) for d in tier.members if api not in d.apis]
        if members:
            tiers.append(tier if len(members) == len(tier.members) else Tier(members, tier.strategy, tier.key))
        elif position == 0:
            raise _unserved(plan, tier, api, param)
    return replace(plan, tiers=tuple(tiers), passed_over=tuple(passed))


def _unserved(plan: RoutePlan, tier: Tier, api: Api, param: str) -> InvalidRequest:
    reasons = " ".join(
        f"Deployment '{d.name}' serves only {', '.join(API_PATHS[a] for a in sorted(d.apis)) or 'no API'}"
        + (" (its `apis` setting narrows it)." if d.apis_narrowed else f" (provider type '{d.provider_type}').")
        for d in tier.members
    )
    return InvalidRequest(
        f"The {plan.asked} does not serve {API_PATHS[api]}. {reasons}", param=param, code="unsupported_api"
    )


def _param(headers: Mapping[str, str]) -> str:
    """What chose the deployments: a header, or the body's `model`."""
    for header in (*DEPLOYMENT_HEADERS, *TAGS_HEADERS):
        if (headers.get(header) or "").strip():
            return header
    return "model"


def _allowed(tier: Tier, principal: Principal, exclude: set[str] | None = None) -> Tier | None:
    members = tuple(d for d in tier.members if principal.may_use(d.name, d.tags) and d.name not in (exclude or ()))
    if not members:
        return None
    return tier if len(members) == len(tier.members) else Tier(members, tier.strategy, tier.key)


def _tags(headers: Mapping[str, str]) -> tuple[tuple[str, ...], str]:
    for header in TAGS_HEADERS:
        value = headers.get(header)
        if value is not None:
            tags = tuple(dict.fromkeys(tag.strip() for tag in value.split(",") if tag.strip()))
            if not tags:
                raise InvalidRequest(
                    f"The {header} header names no tag: give a comma-separated list.",
                    param=header,
                    code="invalid_header",
                )
            return tags, header
    return (), ""


def _ordered_union(groups: Iterable[Iterable[str]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(name for group in groups for name in group))
