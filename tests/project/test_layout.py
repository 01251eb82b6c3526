"""The layout's rules that import-linter does not check (docs/architecture.md): every folder stays
small enough to read at a glance, says in its `__init__` what lives there, and its modules do not
repeat its name."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = sorted(
    init.parent for top in ("gateway", "policies", "providers") for init in (ROOT / top).rglob("__init__.py")
)
MAX_MODULES = 15


def modules(package: Path) -> list[Path]:
    return sorted(path for path in package.glob("*.py") if path.name != "__init__.py")


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_folder_holds_at_most_15_modules(package: Path) -> None:
    assert len(modules(package)) <= MAX_MODULES, [path.name for path in modules(package)]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_package_says_what_lives_in_it(package: Path) -> None:
    text = (package / "__init__.py").read_text()
    assert text.lstrip().startswith('"""'), f"{package.relative_to(ROOT)}/__init__.py has no docstring"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_names_do_not_repeat_their_folder(package: Path) -> None:
    folder = package.name.rstrip("s")  # `routing/routes.py` repeats it as much as `routing/routing_x.py`
    repeating = [path.name for path in modules(package) if path.stem.startswith(folder)]
    assert not repeating
