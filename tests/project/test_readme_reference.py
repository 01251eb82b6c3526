"""The documentation's hand-written tables and names say what the code does: every configuration key
a page names exists (and the generated reference states every default), every provider option of a
provider's table exists, every header the README or a page names is one the gateway reads or writes,
and every metric series the observability page lists is defined."""

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
from providers.anthropic import AnthropicOptions
from providers.azure import AzureOpenAIOptions
from providers.gemini import GeminiOptions
from providers.local.options import LocalOptions
from providers.mock import MockOptions
from providers.openai_chat import OpenAIChatOptions
from providers.openai_compat import OpenAICompatibleOptions

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()
# The hand-written pages: the generated references are tested against the code by test_docs_site.py.
PAGES = {path: path.read_text() for path in sorted(DOCS.rglob("*.md")) if "reference" not in path.parts}
SOURCES = "\n".join(
    path.read_text() for folder in ("gateway", "providers", "policies") for path in (ROOT / folder).rglob("*.py")
)


def page(relative: str) -> str:
    return (DOCS / relative).read_text()


HEADER = re.compile(r"`(x-(?:gateway|portkey|enkrypt)-[a-z-]+)")
HTTP_OPTIONS = (OpenAICompatibleOptions, AzureOpenAIOptions, OpenAIChatOptions, AnthropicOptions, GeminiOptions)


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


# A configuration key as pages write it: `server.port`, `policies.NAME.cache.ttl_s`, `keys[].budget.period`.
CONFIG_KEY = re.compile(
    r"`((?:server|redis|responses|cache|admin|limits|routing|observability|keys\[\]|virtual_keys\[\]|deployments\[\]"
    r"|policies\.NAME)(?:\.[a-z_]+|\[\])+)"
)
NOT_KEYS = {"server.address": "a span attribute", "redis.yaml": "a manifest of the Redis overlay"}
NAMED_KEYS = sorted(
    {
        key
        for path, text in PAGES.items()
        if path.name != "architecture.md"  # it names modules (`routing.plan`), not keys
        for key in CONFIG_KEY.findall(text)
        if key not in NOT_KEYS
    }
)


def test_the_pages_name_configuration_keys() -> None:
    assert len(NAMED_KEYS) > 60


@pytest.mark.parametrize("key", NAMED_KEYS)
def test_every_configuration_key_the_pages_name_exists(key: str) -> None:
    field_at(key)


def reference_rows() -> list[tuple[str, str, list[str]]]:
    """(section, key, cells) of every table row of the generated configuration reference."""
    rows = []
    for block in page("reference/configuration.md").split("\n### ")[1:]:
        title = block.splitlines()[0].strip()
        for line in block.splitlines():
            cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
            if len(cells) == 5 and cells[0].startswith("`"):
                rows.append((title, cells[0].strip("`"), cells))
    return rows


SECTIONS = {
    "ServerConfig": "server",
    "RedisConfig": "redis",
    "CacheSettings": "cache",
    "ResponsesSettings": "responses",
    "LimitsSettings": "limits",
    "AdminConfig": "admin",
    "RoutingConfig": "routing",
    "ClientKeyConfig": "keys[]",
    "VirtualKeyConfig": "virtual_keys[]",
    "DeploymentConfig": "deployments[]",
    "PolicyConfig": "policies.NAME",
}


@pytest.mark.parametrize(
    ("path", "default"),
    [
        (f"{SECTIONS[title]}.{key}", cells[2])
        for title, key, cells in reference_rows()
        if title in SECTIONS and cells[2] not in ("required", "(its defaults)")
    ],
)
def test_every_default_the_configuration_reference_states_is_the_code_s(path: str, default: str) -> None:
    field = field_at(path)
    literal = re.fullmatch(r"`([^`]*)`", default)
    if literal is None or default_of(field) is PydanticUndefined:
        return  # prose: nothing literal to compare
    actual = default_of(field)
    stated = yaml.safe_load(literal.group(1))
    if isinstance(stated, dict) and isinstance(actual, dict):
        assert {name: actual[name] for name in stated} == stated
    elif not isinstance(actual, (dict, list, BaseModel)) and actual is not None:
        assert stated == actual


@pytest.mark.parametrize(
    ("document", "after", "options"),
    [("providers/mock.md", "| option |", MockOptions), ("providers/local.md", "| option |", LocalOptions)],
)
def test_every_provider_option_of_the_docs_exists(document: str, after: str, options: type[BaseModel]) -> None:
    names = {name.strip("` ") for row in table_rows(page(document), after) for name in row[0].split(",")}

    assert names
    assert names <= set(options.model_fields)


def test_every_option_of_the_http_types_table_exists() -> None:
    known = {name for model in HTTP_OPTIONS for name in model.model_fields}
    names = {row[0].strip("` ") for row in table_rows(page("providers/index.md"), "| option | types |")}

    assert len(names) > 10
    assert names - known == set()


def test_every_header_the_docs_name_is_one_the_gateway_knows() -> None:
    named = {header for text in [README, *PAGES.values()] for header in HEADER.findall(text)}
    unknown = {header for header in named if header.lower() not in SOURCES.lower()}

    assert len(named) > 20
    assert unknown == set()


def test_every_metric_series_the_docs_list_is_defined() -> None:
    series = [row[0].strip("`") for row in table_rows(page("observability.md"), "| series |")]

    assert series
    # Defined as "gateway_" + the name, counters without their "_total" (prometheus_client adds it).
    assert [name for name in series if f'"{name.removeprefix("gateway_").removesuffix("_total")}"' not in SOURCES] == []
