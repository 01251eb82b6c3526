"""The documentation: its generated references match the code, every error code the packages raise
is documented, and the site builds strictly (a broken link or anchor fails)."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gateway.api.error_codes import ERROR_CODES
from gateway.config.loader import ConfigError, parse_config
from tests.support.doc_blocks import blocks
from tests.support.script_loader import ROOT, load_script

MKDOCS = ROOT / ".venv" / "bin" / "mkdocs"
PACKAGES = ("gateway", "policies", "providers")


def test_the_reference_pages_are_what_the_code_generates() -> None:
    reference = load_script("scripts/docs_reference.py")

    stale = [
        str(path.relative_to(ROOT))
        for path, text in reference.pages().items()
        if not path.exists() or path.read_text() != text
    ]

    assert stale == [], f"run `.venv/bin/python scripts/docs_reference.py`: {stale} differ from the code"


def test_every_configuration_key_has_a_description() -> None:
    reference = (ROOT / "docs" / "reference" / "configuration.md").read_text()
    section = ""
    undescribed = []
    for line in reference.splitlines():
        if line.startswith("### "):
            section = line[4:]
        elif line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            if not cells[-1]:
                undescribed.append(f"{section}.{cells[0].strip('`')}")

    assert undescribed == [], "add a comment to these fields (the reference's description)"


def _raised_codes() -> dict[str, str]:
    """Every string given as `code=` or assigned to a class's `code`, in the packages -> where."""
    found: dict[str, str] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                value: ast.expr | None = None
                if isinstance(node, ast.keyword):
                    value = node.value if node.arg == "code" else None
                elif isinstance(node, ast.Assign) and any(
                    isinstance(target, ast.Name) and target.id == "code" for target in node.targets
                ):
                    value = node.value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    found.setdefault(value.value, f"{path.relative_to(ROOT)}:{value.lineno}")
    return found


def test_every_error_code_the_gateway_raises_is_in_the_error_reference() -> None:
    raised = _raised_codes()

    missing = {code: where for code, where in raised.items() if code not in ERROR_CODES}

    assert len(raised) > 40  # the scan sees the raise sites
    assert missing == {}, "add them to gateway/api/error_codes.py, then run scripts/docs_reference.py"


def _build(docs_root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(  # noqa: S603 - fixed arguments
        [str(MKDOCS), "build", "--strict", "--site-dir", str(site)],
        cwd=docs_root,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )


@pytest.fixture
def site_copy(tmp_path: Path) -> Path:
    """The site's sources in a folder of their own (so a test may break them)."""
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", copy)
    shutil.copytree(ROOT / "docs", copy / "docs")
    for extra in ("examples", "config.yaml", "README.md"):  # what pages may include as snippets
        if (ROOT / extra).is_dir():
            shutil.copytree(ROOT / extra, copy / extra)
        elif (ROOT / extra).exists():
            shutil.copy(ROOT / extra, copy / extra)
    return copy


def test_the_documentation_site_builds_strictly(site_copy: Path, tmp_path: Path) -> None:
    result = _build(site_copy, tmp_path / "site")

    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "errors.html").exists()  # offline: file URLs
    assert (tmp_path / "site" / "search" / "search_index.js").exists() or (
        tmp_path / "site" / "search" / "search_index.json"
    ).exists()


def test_a_broken_link_fails_the_build(site_copy: Path, tmp_path: Path) -> None:
    index = site_copy / "docs" / "index.md"
    index.write_text(index.read_text() + "\nSee [the missing page](nowhere.md) and [an anchor](#no-such-anchor).\n")

    result = _build(site_copy, tmp_path / "site")

    assert result.returncode != 0
    assert "nowhere.md" in result.stderr


def test_every_documentation_page_a_message_points_to_exists() -> None:
    """A message that sends an operator to docs/… (an error, a warning, `--help`) names a real page."""
    pointed: dict[str, str] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    for page in re.findall(r"docs/[\w/.-]+\.md", node.value):
                        pointed.setdefault(page, f"{path.relative_to(ROOT)}:{node.lineno}")

    missing = {page: where for page, where in pointed.items() if not (ROOT / page).is_file()}

    assert pointed  # messages do point to pages
    assert missing == {}


# Models the YAML names as folders a reader downloads first: stand-ins with the labels of the real ones.
CLASSIFIER_LABELS = {"/models/prompt-guard": ["BENIGN", "INJECTION", "JAILBREAK"]}


def _placeholder(variable: str) -> str:
    """A value a `${VAR}` may hold: an address for URLs, else a secret strong enough for `admin.key`."""
    if variable == "REQUEST_LOG_URL":  # the request log's database (docs/request-log.md)
        return "postgresql://gateway:secret@127.0.0.1:9/gateway"
    if variable.endswith(("_URL", "_BASE_URL", "_ENDPOINT")):
        return "http://127.0.0.1:9/v1"
    return hashlib.sha256(variable.encode()).hexdigest()


# Every YAML block of README.md and docs/ that is not an included file (tests/project/test_docs_blocks.py
# counts these as checked): a config the gateway accepts.
YAML_BLOCKS = [(block.page, block.body) for block in blocks() if block.language == "yaml" and not block.includes]


@pytest.mark.parametrize(("page", "body"), YAML_BLOCKS, ids=[f"{page}#{i}" for i, (page, _) in enumerate(YAML_BLOCKS)])
def test_every_yaml_block_of_the_docs_is_a_config_the_gateway_accepts(page: str, body: str, tmp_path: Path) -> None:
    for folder, labels in CLASSIFIER_LABELS.items():
        if folder in body:
            stand_in = tmp_path / Path(folder).name
            stand_in.mkdir()
            (stand_in / "config.json").write_text(json.dumps({"id2label": dict(enumerate(labels))}))
            body = body.replace(folder, str(stand_in))
    env = {variable: _placeholder(variable) for variable in re.findall(r"\$\{(\w+)", body)}

    try:
        parse_config(body, env, source=page)
    except ConfigError as error:
        pytest.fail(f"{page}: {error.problems}\n{body}")


def test_the_yaml_check_sees_the_documented_configs() -> None:
    pages = {page for page, _ in YAML_BLOCKS}

    assert len(YAML_BLOCKS) >= 20
    assert {"docs/getting-started.md", "docs/guardrails.md", "docs/redis.md", "docs/keys.md"} <= pages
