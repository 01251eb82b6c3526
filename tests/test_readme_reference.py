"""The README's reference tables say what the code does: every configuration key it lists exists, with
the default it states, every provider option exists, and every header it names is one the gateway
reads or writes."""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from gateway.config.settings import GatewayConfig, ProviderSection
from providers.local.options import LocalOptions
from providers.mock import MockOptions
from providers.openai_compat import OpenAICompatibleOptions

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
SOURCES = "\n".join(
    path.read_text() for folder in ("gateway", "providers", "policies") for path in (ROOT / folder).rglob("*.py")
)


def section(title: str) -> str:
    start = README.index(f"\n## {title}")
    return README[start : README.find("\n## ", start + 1)]


def table_rows(text: str, after: str) -> list[list[str]]:
    """The cells of the first Markdown table after the line starting with `after`."""
    lines = text[text.index(after) :].splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def model_of(annotation: Any) -> type[BaseModel] | None:
    """The model inside `X | None`, `list[X]`, `dict[str, X]` or `Annotated[X, …]`, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in typing.get_args(annotation):
        found = model_of(argument)
        if found is not None:
            return found
    return None


def field_at(path: str) -> FieldInfo:
    """`deployments[].provider.type`, `policies.NAME.cache.ttl_s`, `provider.base_url` (openai's)."""
    model: type[BaseModel] | None = GatewayConfig
    parts = [part for part in path.replace("[]", "").split(".") if part != "NAME"]
    if parts[0] == "provider":
        model, parts = OpenAICompatibleOptions, parts[1:]
    found: FieldInfo | None = None
    for part in parts:
        assert model is not None, f"{path}: nothing below {part}"
        if model is ProviderSection and part != "type":
            model = OpenAICompatibleOptions
        assert part in model.model_fields, f"{path}: {model.__name__} has no field {part}"
        found = model.model_fields[part]
        model = model_of(found.annotation)
    assert found is not None
    return found


def default_of(field: FieldInfo) -> Any:
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    return value.model_dump() if isinstance(value, BaseModel) else value


CONFIG_ROWS = table_rows(section("Configuration"), "| key | default | meaning |")


@pytest.mark.parametrize(("key", "default"), [(row[0].strip("`"), row[1]) for row in CONFIG_ROWS])
def test_every_configuration_key_exists_with_its_stated_default(key: str, default: str) -> None:
    field = field_at(key)
    literal = re.fullmatch(r"`([^`]*)`", default)
    if literal is None or default_of(field) is PydanticUndefined:
        return  # "required", "none", prose: nothing literal to compare
    actual = default_of(field)
    stated = literal.group(1).strip('"') if isinstance(actual, str) else yaml.safe_load(literal.group(1))
    if isinstance(stated, dict) and isinstance(actual, dict):
        assert {name: actual[name] for name in stated} == stated
    elif not isinstance(actual, (dict, list)) and actual is not None:
        assert stated == actual


@pytest.mark.parametrize(
    ("title", "after", "options"),
    [("Providers", "### The mock provider", MockOptions), ("Local inference engine", "| option |", LocalOptions)],
)
def test_every_provider_option_of_the_readme_exists(title: str, after: str, options: type[BaseModel]) -> None:
    names = {name.strip("` ") for row in table_rows(section(title), after) for name in row[0].split(",")}

    assert names
    assert names <= set(options.model_fields)


def test_every_header_the_readme_names_is_one_the_gateway_knows() -> None:
    named = set(re.findall(r"`(x-(?:gateway|portkey|enkrypt)-[a-z-]+)", README))
    unknown = {header for header in named if header.lower() not in SOURCES.lower()}

    assert named
    assert unknown == set()


def test_every_metric_series_the_readme_lists_is_defined() -> None:
    series = [row[0].strip("`") for row in table_rows(section("Metrics, dashboard and access log"), "| series |")]

    assert series
    # Defined as "gateway_" + the name, counters without their "_total" (prometheus_client adds it).
    assert [name for name in series if f'"{name.removeprefix("gateway_").removesuffix("_total")}"' not in SOURCES] == []
