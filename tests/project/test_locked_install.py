"""The hash-locked installs (docs/installs.md): each lock pins exactly what
pyproject.toml needs for its set (no less, no more, within pyproject's ranges), every pin with its
hashes, the sets agreeing on every version; this environment is what the dev lock says; every install
command takes only locked packages; the SBOM lists what the runtime lock installs, and that set alone
runs the gateway."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support.tool_venv import ROOT, run, tool_bin

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# Each lock and the extras of its set (the project's build backend is in every set: it is installed
# with --no-build-isolation). torch is pinned apart, without a hash: requirements-torch.txt.
LOCKS = {
    "requirements.lock": (),
    "requirements-local.lock": ("local",),
    "requirements-dev.lock": ("dev", "local"),
}
TOOL_LOCKS = ("scripts/tools/scan.lock", "scripts/tools/supply-chain.lock")
UNHASHED = "torch"


@dataclass(frozen=True)
class Pin:
    version: str
    hashes: tuple[str, ...]
    marker: Marker | None


def read_lock(path: Path) -> dict[str, Pin]:
    pins: dict[str, Pin] = {}
    for line in path.read_text().replace("\\\n", " ").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        spec, *hashes = re.split(r"\s+--hash=", line)
        requirement = Requirement(spec)
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", f"{path.name}: {spec} is not an exact pin"
        pins[canonicalize_name(requirement.name)] = Pin(specifier.version, tuple(hashes), requirement.marker)
    return pins


def roots(extras: tuple[str, ...]) -> list[Requirement]:
    """What pyproject.toml asks for, for the set with these extras."""
    project = PYPROJECT["project"]
    specs = [*project["dependencies"], *PYPROJECT["build-system"]["requires"]]
    specs += [spec for extra in extras for spec in project["optional-dependencies"][extra]]
    return [Requirement(spec) for spec in specs]


def needed(requirements: list[Requirement]) -> tuple[dict[str, str], set[str]]:
    """Every distribution the requirements need on this machine, with the version installed here (whose
    metadata says what each needs in turn), and the names needed but not installed."""
    found: dict[str, str] = {}
    missing: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    queue: list[tuple[Requirement, tuple[str, ...]]] = [(requirement, ("",)) for requirement in requirements]
    while queue:
        requirement, extras = queue.pop()
        if requirement.marker and not any(requirement.marker.evaluate({"extra": extra}) for extra in extras):
            continue
        name = canonicalize_name(requirement.name)
        if (name, frozenset(requirement.extras)) in seen:
            continue
        seen.add((name, frozenset(requirement.extras)))
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            missing.add(name)
            continue
        found[name] = distribution.version
        asked = tuple(requirement.extras) or ("",)
        queue += [(Requirement(spec), asked) for spec in distribution.requires or []]
    return found, missing


def lock_problems(requirements: list[Requirement], pins: dict[str, Pin]) -> list[str]:
    """How a lock disagrees with what the requirements need (empty: it pins exactly that)."""
    found, missing = needed(requirements)
    found.pop(UNHASHED, None)
    problems = [
        f"{name}: needed, not locked (run scripts/lock.sh)" for name in sorted(missing | set(found) - set(pins))
    ]
    problems += [f"{name}: locked, needed by nothing" for name in sorted(set(pins) - set(found) - missing)]
    for requirement in requirements:
        pin = pins.get(canonicalize_name(requirement.name))
        if pin and not requirement.specifier.contains(pin.version, prereleases=True):
            problems.append(f"{requirement.name}: locked at {pin.version}, pyproject.toml asks {requirement.specifier}")
    return problems


@pytest.mark.parametrize(("lock", "extras"), LOCKS.items())
def test_each_lock_pins_exactly_what_pyproject_needs(lock: str, extras: tuple[str, ...]) -> None:
    assert lock_problems(roots(extras), read_lock(ROOT / lock)) == []


def test_a_lock_that_disagrees_with_pyproject_is_caught() -> None:
    """The check above can fail: a new dependency, a range the lock is outside of, a dependency dropped."""
    pins = read_lock(ROOT / "requirements.lock")
    runtime = roots(())

    assert lock_problems([*runtime, Requirement("llm-gateway-not-a-package>=1")], pins) == [
        "llm-gateway-not-a-package: needed, not locked (run scripts/lock.sh)"
    ]
    assert lock_problems([*runtime, Requirement("aiohttp>=99")], pins) == [
        f"aiohttp: locked at {pins['aiohttp'].version}, pyproject.toml asks >=99"
    ]
    without_orjson = [r for r in runtime if r.name != "orjson"]
    assert lock_problems(without_orjson, pins) == ["orjson: locked, needed by nothing"]


@pytest.mark.parametrize("lock", [*LOCKS, *TOOL_LOCKS])
def test_every_pin_is_exact_and_hashed(lock: str) -> None:
    pins = read_lock(ROOT / lock)

    assert pins
    assert UNHASHED not in pins
    for name, pin in pins.items():
        assert pin.hashes, f"{lock}: {name} has no hash"
        assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", digest) for digest in pin.hashes), name


def test_the_locks_agree_and_nest() -> None:
    runtime, local, dev = (read_lock(ROOT / lock) for lock in LOCKS)

    assert set(runtime) <= set(local) <= set(dev)
    for name, pin in {**runtime, **local}.items():
        assert pin.version == dev[name].version, f"{name}: the locks disagree"


def test_this_environment_is_what_the_dev_lock_and_the_torch_pin_say() -> None:
    """scripts/bootstrap.sh dev installed exactly the lock (its stamp reinstalls when the lock changes)."""
    drifted = {
        name: (pin.version, importlib.metadata.version(name))
        for name, pin in read_lock(ROOT / "requirements-dev.lock").items()
        if Version(importlib.metadata.version(name)) != Version(pin.version)
    }
    (torch_pin,) = [
        Requirement(line) for line in (ROOT / "requirements-torch.txt").read_text().splitlines() if line[:1].isalpha()
    ]

    (torch_range,) = [r.specifier for r in roots(("local",)) if r.name == UNHASHED]
    (pinned,) = torch_pin.specifier

    assert drifted == {}
    assert Version(importlib.metadata.version(UNHASHED)).public == pinned.version  # 2.13.0+cpu is 2.13.0
    assert torch_range.contains(pinned.version)


def install_commands(path: Path) -> list[str]:
    text = path.read_text().replace("\\\n", " ")
    lines = [part for line in text.splitlines() for part in line.split("&&") if not line.lstrip().startswith("#")]
    return [line.strip() for line in lines if re.search(r'pip(\[@\]\}")? install', line)]


@pytest.mark.parametrize("path", ["Dockerfile", "scripts/bootstrap.sh", "scripts/sbom.sh", "scripts/tools.sh"])
def test_every_install_takes_only_locked_packages(path: str) -> None:
    """Each pip install is either the hash-checked lock or one thing alone (--no-deps): the project,
    or torch at its pin. Nothing resolves a dependency outside a lock."""
    commands = install_commands(ROOT / path)

    assert any("--require-hashes" in command for command in commands)
    for command in commands:
        assert "--require-hashes" in command or "--no-deps" in command, f"{path}: {command}"
        assert "--upgrade" not in command, f"{path}: {command}"


def test_the_sbom_lists_what_the_runtime_lock_installs(tmp_path: Path) -> None:
    tool_bin("supply-chain")
    result = run([ROOT / "scripts" / "sbom.sh"], timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    sbom = json.loads((ROOT / result.stdout.strip().splitlines()[-1]).read_text())
    components: dict[str, tuple[str, str | None]] = {
        canonicalize_name(c["name"]): (c["version"], c.get("purl")) for c in sbom["components"]
    }
    components.pop("pip")  # the virtual environment's own installer, not a dependency
    pins = read_lock(ROOT / "requirements.lock")
    gateway = ROOT / "build" / "sbom" / "venv-runtime" / "bin" / "gateway"
    check = run(
        [gateway, "check-config", "config.yaml"], cwd=ROOT, env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    )

    assert sbom["bomFormat"] == "CycloneDX"
    assert sbom["metadata"]["component"]["name"] == "llm-gateway"
    assert components["aiohttp"] == (pins["aiohttp"].version, f"pkg:pypi/aiohttp@{pins['aiohttp'].version}")
    assert {name: version for name, (version, _) in components.items()} == {n: p.version for n, p in pins.items()}
    assert check.returncode == 0, check.stdout + check.stderr  # the runtime set alone runs the gateway
