"""Import one of the repository's scripts (they are not a package) by its path, so a test can call
its functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_script(relative: str) -> ModuleType:
    """`relative`: the script's path from the repository's root, e.g. `scripts/guardrail_eval.py`."""
    path = ROOT / relative
    name = path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses in the script resolve their module through it
    spec.loader.exec_module(module)
    return module
