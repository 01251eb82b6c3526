"""Names one part of config.yaml gives to another, checked to exist: each dangling one is a problem
named by its YAML path, with the nearest defined name.

Read from the document itself (interpolated, not yet validated), so they are reported in the same
run as every other problem, even when another part of the file is wrong; an entry too malformed to
name anything is left to the models' own errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from gateway.config.key_policy import ALL, TAG_PREFIX
from gateway.config.suggestions import did_you_mean

_LISTED_MAX = 12  # defined names listed in a message; beyond, only the nearest one


def dangling_references(document: Mapping[str, Any]) -> list[str]:
    deployments = _entries(document.get("deployments"))
    names = _strings(d.get("name") for _, d in deployments)
    aliases = _strings(alias for _, d in deployments for _, alias in _items(d.get("aliases")))
    tags = _strings(tag for _, d in deployments for _, tag in _items(d.get("tags")))
    policies = document.get("policies")
    policy_names = set(policies) if isinstance(policies, dict) else set()
    problems = []
    for index, deployment in deployments:
        who, path = f"deployment {deployment.get('name')!r}", f"deployments[{index}]"
        for position, target in _items(deployment.get("fallbacks")):
            if target not in names | aliases:
                where = f"{path}.fallbacks[{position}]"
                problems.append(
                    f"{where}: {who} falls back to {_unknown(target, 'deployment name or alias', names | aliases)}"
                )
        for position, policy in _items(deployment.get("policies")):
            if policy not in policy_names:
                problems.append(
                    f"{path}.policies[{position}]: {who} names policy {policy!r}, which is not defined under "
                    f"policies{_defined(policy, policy_names)}"
                )
    problems += _virtual_key_problems(document, deployments)
    problems += _key_problems(document, names, aliases, tags)
    problems += _group_problems(document, names, aliases)
    return problems


def _virtual_key_problems(document: Mapping[str, Any], deployments: list[tuple[int, dict[str, Any]]]) -> list[str]:
    defined = {
        entry["name"]: entry.get("provider")
        for _, entry in _entries(document.get("virtual_keys"))
        if isinstance(entry.get("name"), str)
    }
    problems = []
    for index, deployment in deployments:
        provider = deployment.get("provider")
        ref = provider.get("virtual_key") if isinstance(provider, dict) else None
        if not isinstance(ref, str):
            continue
        assert isinstance(provider, dict)
        path, who = f"deployments[{index}].provider.virtual_key", f"deployment {deployment.get('name')!r}"
        if ref not in defined:
            problems.append(
                f"{path}: {who} names virtual key {ref!r}, which is not defined under virtual_keys"
                f"{_defined(ref, defined)}"
            )
        elif (
            isinstance(defined[ref], str) and isinstance(provider.get("type"), str) and defined[ref] != provider["type"]
        ):
            problems.append(
                f"{path}: {who} (provider {provider.get('type')!r}) names virtual key {ref!r}, "
                f"which is for provider {defined[ref]!r}"
            )
    return problems


def _key_problems(document: Mapping[str, Any], names: set[str], aliases: set[str], tags: set[str]) -> list[str]:
    """A key's deployments (names, `tag:NAME`; an alias selects nothing there) and, without Redis to
    hold more of them, its virtual keys."""
    redis = document.get("redis")
    with_redis = isinstance(redis, dict) and bool(redis.get("url") or redis.get("mode") == "sentinel")
    virtual = _strings(entry.get("name") for _, entry in _entries(document.get("virtual_keys")))
    problems = []
    for index, key in _entries(document.get("keys")):
        who, path = f"key {key.get('name')!r}", f"keys[{index}]"
        for position, target in _items(key.get("deployments")):
            if target == ALL or target in names:
                continue
            if target.startswith(TAG_PREFIX):
                tag = target.removeprefix(TAG_PREFIX)
                if tag not in tags:
                    problems.append(
                        f"{path}.deployments[{position}]: {who} names tag {tag!r}, which no deployment carries"
                        f"{_defined(tag, tags, 'tags')}"
                    )
                continue
            why = (
                f"{target!r}, an alias: a key lists deployment names, tag:NAME or {ALL}"
                if target in aliases
                else _unknown(target, "deployment name", names)
            )
            problems.append(f"{path}.deployments[{position}]: {who} names {why}")
        for position, target in _items(key.get("virtual_keys")):
            if not with_redis and target != ALL and target not in virtual:
                problems.append(
                    f"{path}.virtual_keys[{position}]: {who} names virtual key {target!r}, which is not defined "
                    f"under virtual_keys, and without redis.url none can be added{_defined(target, virtual)}"
                )
    return problems


def _group_problems(document: Mapping[str, Any], names: set[str], aliases: set[str]) -> list[str]:
    routing = document.get("routing")
    groups = _entries(routing.get("groups")) if isinstance(routing, dict) else []
    problems = []
    for index, group in groups:
        path, alias = f"routing.groups[{index}]", group.get("alias")
        if isinstance(alias, str) and alias not in aliases:
            problems.append(f"{path}.alias: {alias!r} is no deployment alias{_defined(alias, aliases)}")
        for position, target in _items(group.get("fallbacks")):
            if target not in names | aliases:
                problems.append(
                    f"{path}.fallbacks[{position}]: group {alias!r} falls back to "
                    f"{_unknown(target, 'deployment name or alias', names | aliases)}"
                )
    return problems


def _unknown(value: str, kind: str, defined: set[str]) -> str:
    return f"{value!r}, which is no {kind}{_defined(value, defined)}"


def _defined(value: str, defined: Iterable[str], label: str = "defined") -> str:
    known = sorted(defined)
    listed = f" ({label}: {', '.join(known) or 'none'})" if len(known) <= _LISTED_MAX else ""
    return f"{did_you_mean(value, known)}{listed}"


def _entries(section: Any) -> list[tuple[int, dict[str, Any]]]:
    return (
        [(i, entry) for i, entry in enumerate(section) if isinstance(entry, dict)] if isinstance(section, list) else []
    )


def _items(values: Any) -> Iterator[tuple[int, str]]:
    """The strings of a list with their positions (anything else is the models' to report)."""
    if isinstance(values, list):
        yield from ((i, value) for i, value in enumerate(values) if isinstance(value, str))


def _strings(values: Iterable[Any]) -> set[str]:
    return {value for value in values if isinstance(value, str)}
