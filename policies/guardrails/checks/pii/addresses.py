"""Dotted quads and colon-hex groups that read as something other than an IP address: the `pii`
check's judgement of version strings and of byte strings written with colons.

- **Versions**: a quad whose first three parts are a version's (``3.12.2.6``, ``4.18.18.71``: a
  major up to 20, 10 excepted, a minor up to 30, a patch under 100) is an address only when words
  say so: before it (``IP``, ``host``, ``nameserver``, ``lookup``: `context`), or after it (a port:
  ``from 5.18.33.9 port 52144``, ``2.4.1.7:8080``). Random public addresses fall in that range about
  once in three hundred.
- **10.x after version words**: a quad of the private 10.0.0.0/8 with a version's small minor
  (``10.4.12.2``) after words about versions ("bumped the dependency to") is a version.
- **Blocks no host is numbered from**: 0.0.0.0/8 (wildcard masks ``0.0.0.255``, OSPF areas) and
  240.0.0.0/4 (every netmask ``255.255.x.y``, the broadcast): no person's address.
- **Sections marked in Chinese and Japanese**: ``第3.2.1.4条``, ``3.2.1.4節``.
- **Byte strings**: colon-hex whose every group is two hex digits (``04:4f:21:9a:7e:00:12:33``, a
  certificate serial, a WWN, an EUI-64) is bytes, however many: an IPv6 address writes groups of one
  to four digits without leading zeros kept to a fixed width, and no address is only byte pairs.
"""

from __future__ import annotations

import re

from policies.guardrails.checks.pii.context import nearest

_VERSION_MAJOR = 20
_VERSION_MINOR = 30
_VERSION_PATCH = 99
# Words about versions and changing them: a version's neighbours, not an address's.
_VERSIONING = frozenset(
    {
        *("version", "versions", "ver", "release", "released", "releases", "build", "builds", "firmware"),
        *("bump", "bumped", "bumping", "upgrade", "upgraded", "upgrading", "update", "updated", "updating"),
        *("downgrade", "downgraded", "downgrading", "pin", "pinned", "rollback", "patch", "patched"),
        *("dependency", "dependencies", "package", "packages", "library", "sdk", "changelog", "semver"),
        *("aktualisiert", "aktualisierung", "mise", "jour", "actualizado", "actualizacion", "aggiornato"),
        *("aggiornamento", "atualizado"),
    }
)
_PORT_AFTER = re.compile(r":\d{1,5}(?!\d)|,? (?:port|ports|puerto|porta) \d")  # ":8080", " port 52144"
_BYTE_PAIRS = re.compile(r"[0-9a-f]{2}(?::[0-9a-f]{2})+")


def version_like(value: str) -> bool:
    """A dotted quad whose first three parts are a version's (``3.12.2.6``): the private 10.0.0.0/8 is
    a common address, so a major of 10 is not."""
    major, minor, patch, _ = map(int, value.split("."))
    return major <= _VERSION_MAJOR and major != 10 and minor <= _VERSION_MINOR and patch <= _VERSION_PATCH


def versioned(value: str, words: list[str]) -> bool:
    """A quad of the private 10.0.0.0/8 with a version's small minor number (``10.4.12.2``), after
    words about versions anywhere in the `words` before it ("bumped the dependency to", "firmware
    … now on"): a version, unless they also name an address (`says_address`)."""
    parts = value.split(".")
    if parts[0] != "10" or int(parts[1]) > _VERSION_MINOR:
        return False
    return any(word in _VERSIONING for word in words) and not says_address(words)


def says_address(words: list[str]) -> bool:
    """The words name an address outright (``IP``, ``host``, ``server``...), not just ``from`` a place:
    what a version-like quad needs ("bumped from 1.0.5.48 to 2.0.0.1" is a version)."""
    verdict, word = nearest(words, "ipv4")
    return verdict == "positive" and word not in ("from", "to")


def port_after(text: str, end: int) -> bool:
    """Does a port follow the quad ending at `end` (``:443``, `` port 22``)? Versions have none."""
    return _PORT_AFTER.match(text, end) is not None


def unassigned(value: str) -> bool:
    """Is the quad in a block no host is numbered from: 0.0.0.0/8 ("this network": wildcard masks
    ``0.0.0.255``, OSPF areas ``0.0.0.1``) or 240.0.0.0/4 (reserved, and the broadcast: every netmask
    from ``240.0.0.0`` to ``255.255.255.252`` lies there)? No person's address is either."""
    first = int(value[: value.index(".")])
    return first == 0 or first >= _RESERVED_FROM


_RESERVED_FROM = 240
# A number of a Chinese or Japanese text's article or section: 第3.2.1.4条, 3.2.1.4節, 5.1.2.3 节.
_SECTION_BEFORE = "第"
_SECTION_AFTER = re.compile(r" ?[条條節节項项章款]")


def section_marked(text: str, start: int, end: int) -> bool:
    """Is the quad at ``text[start:end]`` marked as a section or an article by the characters Chinese and
    Japanese write around one?"""
    return text[max(0, start - 2) : start].rstrip().endswith(_SECTION_BEFORE) or (
        _SECTION_AFTER.match(text, end) is not None
    )


def byte_string(value: str) -> bool:
    """Is this colon-hex only two-digit groups (a serial, a hardware address), not an IPv6 address?"""
    return _BYTE_PAIRS.fullmatch(value) is not None
