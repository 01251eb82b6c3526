"""Every fenced block of README.md and docs/ (a command, a config, code, output) is run or compared by
a test, or is a tested file included into the page (issue 36). How each block is checked:

- included (`--8<-- "FILE"`): a file of `examples/`, each run by tests/examples (which fails on a file
  none runs), or a README section, whose blocks are inventoried here in turn;
- generated: the `--help` output of docs/reference/, rewritten by scripts/docs_reference.py and
  compared with the code by tests/project/test_docs_site.py;
- YAML: loaded as a config by tests/project/test_docs_site.py;
- taken by a test with `doc_block(page, start)` (tests/support/doc_blocks.py), which runs it as written
  or compares it with what the gateway prints.

A block that needs what no test machine has (a Docker daemon, a cluster, PyPI) is in NOT_RUN_HERE with
the reason, and is still taken by a test that checks it offline."""

from __future__ import annotations

import ast
import functools

from tests.support.doc_blocks import ROOT, Block, blocks, doc_block
from tests.support.script_loader import load_script

# (page, start) -> why it cannot run in a test, and what checks it instead.
NOT_RUN_HERE = {
    ("README.md", "scripts/serve.sh --config config.yaml"): (
        "its second line, scripts/test.sh, is the test command itself (.ci/run runs exactly it); "
        "tests/e2e/test_first_run.py runs the first line and checks the second names that script"
    ),
    ("docs/deployment.md", "docker build -t REGISTRY/llm-gateway"): (
        "needs a Docker daemon, a registry and a Kubernetes cluster; tests/docs/test_offline_blocks.py "
        "runs its kubectl lines with --dry-run=client, renders what `apply -k` sends, and checks the rest"
    ),
    ("docs/installs.md", "pip install --require-hashes -r requirements.lock"): (
        "installs from PyPI into an environment of its own (minutes, network); tests/docs/test_offline_blocks.py "
        "runs it with pip's --dry-run in a copy of the image's build context (the locks parse, with their hashes, "
        "the project builds) and checks the Dockerfile runs the same steps and the locks' extras exist"
    ),
    ("docs/observability.md", "docker compose up --build -d"): (
        "needs a Docker daemon with compose; tests/docs/test_offline_blocks.py checks the compose file it starts"
    ),
}


@functools.cache
def _claims() -> dict[tuple[str, str], str]:
    """Every `doc_block(PAGE, "start")` call under tests/ -> the test file that makes it (an argument
    is a string, or the name of a module-level string such as `PAGE = "docs/…"`)."""
    claims: dict[tuple[str, str], str] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        module = ast.parse(path.read_text())
        constants = {
            target.id: node.value.value
            for node in module.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            for target in node.targets
            if isinstance(target, ast.Name) and isinstance(node.value.value, str)
        }
        for node in ast.walk(module):
            if not isinstance(node, ast.Call) or len(node.args) != 2:
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            values = [_string(arg, constants) for arg in node.args]
            if name == "doc_block" and all(isinstance(value, str) for value in values):
                claims[(str(values[0]), str(values[1]))] = str(path.relative_to(ROOT))
    return claims


def _string(node: ast.expr, constants: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return constants.get(node.id) if isinstance(node, ast.Name) else None


@functools.cache
def _generated_pages() -> set[str]:
    return {str(path.relative_to(ROOT)) for path in load_script("scripts/docs_reference.py").pages()}


def _included_file_is_tested(target: str) -> bool:
    file, _, section = target.partition(":")
    if file == "README.md":
        return bool(section)  # a section of the README: its blocks are in blocks() too
    return file.startswith("examples/") and (ROOT / file).is_file()


def _how_checked(block: Block, taken: set[tuple[str, str]], generated: set[str]) -> str | None:
    if block.includes:
        return "included" if all(_included_file_is_tested(target) for target in block.includes) else None
    if block.page in generated:
        return "generated"
    if block.language == "yaml":
        return "loaded as a config"
    if any(page == block.page and block.start.startswith(start) for page, start in taken):
        return "taken by a test"
    return None


def test_every_block_of_the_docs_is_run_compared_or_included() -> None:
    taken = set(_claims())
    generated = _generated_pages()

    unchecked = [
        f"{block.where()} {block.start[:60]!r}" for block in blocks() if not _how_checked(block, taken, generated)
    ]

    assert unchecked == [], (
        "run each in a test that takes it with tests.support.doc_blocks.doc_block(page, start), or move it to "
        "examples/ and include it with --8<--:\n" + "\n".join(unchecked)
    )


def test_each_claim_names_one_block() -> None:
    claims = _claims()

    for (page, start), test in claims.items():
        assert (ROOT / page).is_file(), f"{test} takes a block of {page}, which does not exist"
        doc_block(page, start)  # exactly one block, or it fails saying which


def test_what_cannot_run_here_is_few_named_and_checked_offline() -> None:
    claims = _claims()

    assert len(NOT_RUN_HERE) <= 5  # the exception, not the rule
    for page, start in NOT_RUN_HERE:
        doc_block(page, start)
        assert (page, start) in claims, f"{page} {start!r}: a test must check it offline"


def test_the_inventory_sees_every_kind_of_block() -> None:
    generated = _generated_pages()
    kinds = [_how_checked(block, set(_claims()), generated) for block in blocks()]

    assert len(kinds) >= 80
    assert {"included", "generated", "loaded as a config", "taken by a test"} <= set(kinds)
    assert kinds.count("taken by a test") >= 14
    assert {block.page for block in blocks()} >= {"README.md", "docs/getting-started.md"}
