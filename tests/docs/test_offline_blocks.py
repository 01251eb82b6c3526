"""The blocks that need what a test machine lacks (a Docker daemon, a registry, a cluster, a fresh
environment filled from PyPI), checked as far as runs offline, and the architecture's package map,
compared with the code. tests/project/test_docs_blocks.py lists these blocks in NOT_RUN_HERE."""

from __future__ import annotations

import base64
import re
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

import yaml
from cryptography.fernet import Fernet

from gateway.cli import build_parser
from tests.support.doc_blocks import ROOT, doc_block, run_shell
from tests.support.tool_venv import run, tool_bin

# -- docs/architecture.md: the package map ------------------------------------------------------------

MAP_LINE = re.compile(r"^([\s│├└─]*)((?:gateway|policies|providers)[\w./]*(?:, gateway\.\w+)*)(.*)$")
# In the import-linter layers but not drawn: the page's prose names them (`python -m gateway`, the
# start-up banner the composition root prints, and the console beside gateway/pipeline/).
NOT_DRAWN = {"gateway.__main__", "gateway.banner", "gateway.console"}


def _drawn_layers() -> tuple[list[set[str]], dict[str, str]]:
    """The map's packages grouped by depth (the column they are drawn at), and each one's description."""
    by_column: dict[int, set[str]] = {}
    described: dict[str, str] = {}
    current = ""
    for line in doc_block("docs/architecture.md", "gateway.app, gateway.cli, gateway.workers").body.splitlines():
        match = MAP_LINE.match(line)
        if match is None:
            described[current] += " " + line  # a description's second line
            continue
        names = [name.strip().rstrip("/").replace("/", ".") for name in match.group(2).split(",")]
        by_column.setdefault(len(match.group(1)), set()).update(names)
        current = names[-1]
        described[current] = match.group(3)
    return [by_column[column] for column in sorted(by_column)], described


def test_the_package_map_draws_the_import_linter_layers_in_order() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [contract] = [c for c in pyproject["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    layers = [set(re.split(r"\s*[:|]\s*", layer)) for layer in contract["layers"]]
    drawn, _ = _drawn_layers()

    assert len(drawn) == len(layers)
    for shown, layer in zip(drawn, layers, strict=True):
        assert shown <= layer, f"drawn at one depth but not one layer: {shown - layer}"
        assert layer - shown <= NOT_DRAWN, f"a layer's package the map leaves out: {layer - shown - NOT_DRAWN}"


def test_every_folder_and_module_the_package_map_names_exists() -> None:
    _, described = _drawn_layers()

    for package, description in described.items():
        folder = ROOT / package.replace(".", "/")
        assert folder.is_dir() or folder.with_suffix(".py").is_file(), package
        for name in re.findall(r"(?<![\w/.$])([a-z_]+(?:/|\.py))(?!\w)", description):
            assert any(folder.rglob(name.rstrip("/"))), f"{package}: {name} is not there"


# -- docs/deployment.md: the Kubernetes apply block ---------------------------------------------------

# Each command of the block runs in bash as written, with three commands stood in for: `docker` and
# `kustomize` (no daemon, no registry, no kustomize binary) and `kubectl exec` (no pod) record their
# arguments for the asserts below; `kubectl create` runs for real with --dry-run=client (the objects it
# would send, printed), `kubectl apply -k DIR` renders DIR with `kubectl kustomize` (what it would send,
# into applied.yaml).
KUBERNETES_SHIMS = r"""
record() { local file="$RECORDED/$1"; shift; printf '%s\0' "$@" > "$file"; }
docker() { record "docker-$1" "$@"; }
kustomize() { record kustomize "$PWD" "$@"; }
after() {  # the argument after $1 among the rest
    local previous="" arg
    for arg in "${@:2}"; do [[ "$previous" == "$1" ]] && echo "$arg"; previous="$arg"; done
}
kubectl() {
    if [[ " $* " == *" exec "* ]]; then record kubectl-exec "$@"
    elif [[ " $* " == *" apply -k "* ]]; then "$KUBECTL" kustomize "$(after -k "$@")" > "$RECORDED/applied.yaml"
    else echo ---; "$KUBECTL" "$@" --dry-run=client -o yaml
    fi
}
"""


def _recorded(folder: Path, name: str) -> list[str]:
    return (folder / name).read_text().split("\0")[:-1]


def _kubernetes_workspace(tmp_path: Path) -> tuple[Path, Path]:
    """The repository as the block's shell sees it (its deploy/ and the .venv whose gateway prints
    the encryption key), and a folder for what the stand-ins record."""
    checkout, recorded = tmp_path / "checkout", tmp_path / "recorded"
    checkout.mkdir()
    recorded.mkdir()
    shutil.copytree(ROOT / "deploy", checkout / "deploy")
    shutil.copy(ROOT / "Dockerfile", checkout / "Dockerfile")
    (checkout / ".venv").symlink_to(Path(sys.prefix))
    return checkout, recorded


def test_the_kubernetes_block_creates_what_the_overlay_it_applies_needs(tmp_path: Path) -> None:
    kubectl = tool_bin("scan") / "kubectl"
    block = doc_block("docs/deployment.md", "docker build -t REGISTRY/llm-gateway").body
    checkout, recorded = _kubernetes_workspace(tmp_path)
    env = {"KUBECTL": str(kubectl), "RECORDED": str(recorded), "OPENAI_API_KEY": "sk-placeholder"}

    ran = run_shell(KUBERNETES_SHIMS + block, checkout, env)

    assert ran.returncode == 0, ran.stderr
    created = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(ran.stdout) if o}
    applied = [o for o in yaml.safe_load_all((recorded / "applied.yaml").read_text()) if o]
    [namespace] = {o["metadata"].get("namespace") for o in applied} - {None}
    assert ("Namespace", namespace) in created  # the one the overlay's objects live in
    needed = {
        (ref["name"], ref["key"])
        for o in applied
        if o["kind"] == "Deployment"
        for container in o["spec"]["template"]["spec"]["containers"]
        for entry in container.get("env", [])
        if (ref := entry.get("valueFrom", {}).get("secretKeyRef"))
    }
    secrets = {name: o["data"] for (kind, name), o in created.items() if kind == "Secret"}
    assert needed, "the overlay refers to no Secret?"
    assert {(name, key) for name, data in secrets.items() for key in data} >= needed
    assert {o["metadata"]["namespace"] for (kind, _), o in created.items() if kind == "Secret"} == {namespace}
    Fernet(base64.b64decode(secrets["llm-gateway-keys"]["encryption-key"]))  # `gateway keys encryption-key`'s
    assert len(base64.b64decode(secrets["llm-gateway-keys"]["admin-key"])) >= 32  # admin.key's minimum

    exec_command = _recorded(recorded, "kubectl-exec")
    target = exec_command[exec_command.index("exec") + 1]
    gateway_command = exec_command[exec_command.index("--") + 1 :]
    assert target.removeprefix("deploy/") in {o["metadata"]["name"] for o in applied if o["kind"] == "Deployment"}
    assert gateway_command[0] == "gateway"
    parsed = build_parser().parse_args(gateway_command[1:])  # a command line the image's gateway accepts
    assert (parsed.command, parsed.keys_command) == ("keys", "create")

    _check_the_image_flow(recorded, kubectl, checkout)


def _check_the_image_flow(recorded: Path, kubectl: Path, checkout: Path) -> None:
    """The image `docker build` tags and pushes is the one `kustomize edit set image` gives the pods:
    the edit made as kustomize makes it (newName, newTag), then the overlay rendered."""
    build, push = _recorded(recorded, "docker-build"), _recorded(recorded, "docker-push")
    image = build[build.index("-t") + 1]
    assert build[-1] == "."  # the context: the repository, with its Dockerfile
    assert push == ["push", image]
    folder, *edit = _recorded(recorded, "kustomize")
    assert edit[:3] == ["edit", "set", "image"]
    name, _, new = edit[3].partition("=")
    assert new == image
    kustomization_path = Path(folder) / "kustomization.yaml"
    kustomization: dict[str, Any] = yaml.safe_load(kustomization_path.read_text())
    [entry] = [entry for entry in kustomization["images"] if entry["name"] == name]
    entry["newName"], _, entry["newTag"] = image.rpartition(":")
    kustomization_path.write_text(yaml.safe_dump(kustomization))

    overlay = run([kubectl, "kustomize", checkout / "deploy" / "kubernetes" / "overlays" / "single-redis"])

    assert overlay.returncode == 0, overlay.stderr
    deployment = next(
        o for o in yaml.safe_load_all(overlay.stdout) if o["kind"] == "Deployment" and o["metadata"]["name"] == name
    )
    images = {c["name"]: c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert images["gateway"] == image


# -- docs/installs.md: the three pip steps ------------------------------------------------------------

DRY_RUN_PIP = f'pip() {{ "{sys.executable}" -m pip "$@" --dry-run --disable-pip-version-check; }}\n'


def _pip_steps() -> list[list[str]]:
    block = doc_block("docs/installs.md", "pip install --require-hashes -r requirements.lock").body
    return [line.split("#")[0].split()[2:] for line in block.splitlines() if line.strip()]


def test_the_install_steps_run_as_a_dry_run_in_the_image_s_build_context(tmp_path: Path) -> None:
    """Each step with pip's --dry-run, in a copy of what the image copies: the locks parse with their
    hashes, this (locked) environment already holds every pin, and the project builds, offline."""
    context = tmp_path / "context"
    context.mkdir()
    for name in re.findall(r"^!(\S+)$", (ROOT / ".dockerignore").read_text(), flags=re.MULTILINE):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, context / name)
    block = doc_block("docs/installs.md", "pip install --require-hashes -r requirements.lock").body

    ran = run_shell(DRY_RUN_PIP + block, context)

    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    would_install = re.findall(r"^Would install (.+)$", ran.stdout, flags=re.MULTILINE)
    assert [line.split() for line in would_install] == [["llm-gateway-0.1.0"]]  # the locks: all in place


def test_the_install_steps_are_the_image_s_and_name_the_locks_and_extras_that_exist() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    image_steps = [step.split() for step in re.findall(r"pip install ([^&\n]+)", dockerfile)]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    block = doc_block("docs/installs.md", "pip install --require-hashes -r requirements.lock").body

    for step in _pip_steps():
        assert any(set(step) <= set(image_step) for image_step in image_steps), f"the Dockerfile runs no {step}"
    others = re.findall(r"# or ((?:-\w+(?: / )?)+)", block)
    assert others == ["-local / -dev"]
    for suffix in others[0].split(" / "):
        assert (ROOT / f"requirements{suffix}.lock").is_file()
        assert suffix.removeprefix("-") in extras  # each lock is the runtime plus an extra of that name


# -- docs/observability.md: the compose stack's start ---------------------------------------------------

COMPOSE_FILES = ("compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml")  # compose's order


def test_the_compose_start_builds_the_stack_the_traced_request_reaches() -> None:
    started = doc_block("docs/observability.md", "docker compose up --build -d").body.split()
    request = doc_block("docs/observability.md", "curl -si http://127.0.0.1:8080/v1/completions").body
    [found] = [name for name in COMPOSE_FILES if (ROOT / name).is_file()]  # the file `docker compose` reads
    services = yaml.safe_load((ROOT / found).read_text())["services"]
    gateway = services["gateway"]
    [published] = gateway["ports"]
    host_port = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", published).split(":")[0]  # unset: the default

    assert started == ["docker", "compose", "up", "--build", "-d"]
    assert (ROOT / gateway["build"]["context"] / "Dockerfile").is_file()  # what --build builds
    assert f"127.0.0.1:{host_port}/" in request
    assert {"otel-collector", "jaeger"} <= set(services)  # where its trace goes (tests/gateway/observability)
