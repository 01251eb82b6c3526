"""Cache keys: any change to what the upstream is asked changes the key; who and where too."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from gateway.api.schemas import INT64_MAX, INT64_MIN, CompletionRequest
from policies.cache import CachePolicy, cache_key, expected_choices, key, may_cache

BASE: dict[str, Any] = {"model": "instruct", "prompt": "Say hello"}
EXCLUDED = sorted(key.EXCLUDED_FIELDS)
KEY_FIELDS = sorted(set(CompletionRequest.model_fields) - key.EXCLUDED_FIELDS)

texts = st.text(max_size=12)
penalties = st.floats(-2.0, 2.0, allow_nan=False)
token_ids = st.integers(0, 100_000)
json_scalars = st.none() | st.booleans() | st.integers(INT64_MIN, INT64_MAX) | st.floats(allow_nan=False) | texts
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3)
)

# One strategy of valid values per request field. A field added to CompletionRequest later gets a
# parametrized case of its own below, which fails until it is given a strategy here.
FIELD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "model": st.text(min_size=1, max_size=12),
    "prompt": st.none()
    | texts
    | st.lists(texts, min_size=1, max_size=3)
    | st.lists(token_ids, min_size=1, max_size=3)
    | st.lists(st.lists(token_ids, min_size=1, max_size=3), min_size=1, max_size=3),
    "best_of": st.none() | st.integers(1, 20),
    "echo": st.none() | st.booleans(),
    "frequency_penalty": st.none() | penalties,
    "logit_bias": st.none()
    | st.dictionaries(token_ids.map(str), st.floats(-100.0, 100.0, allow_nan=False), max_size=3),
    "logprobs": st.none() | st.integers(0, 5),
    "max_tokens": st.none() | st.integers(0, 10_000),
    "n": st.none() | st.integers(1, 128),
    "presence_penalty": st.none() | penalties,
    "seed": st.none() | st.integers(INT64_MIN, INT64_MAX),
    "stop": st.none() | texts | st.lists(texts, min_size=1, max_size=4),
    "suffix": st.none() | texts,
    "temperature": st.none() | st.floats(0.0, 2.0, allow_nan=False),
    "top_p": st.none() | st.floats(0.0, 1.0, allow_nan=False),
}


def key_of(
    body: dict[str, Any], deployment: str = "instruct", scope: str = "team-a", namespace: str | None = None
) -> str:
    request = CompletionRequest.model_validate(body)
    return cache_key(deployment=deployment, scope=scope, namespace=namespace, request=request)


def dumped(body: dict[str, Any], field: str) -> bytes:
    value = CompletionRequest.model_validate(body).model_dump()[field]
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


@pytest.mark.parametrize("field", KEY_FIELDS)
@given(data=st.data())
def test_changing_any_request_field_changes_the_key(field: str, data: st.DataObject) -> None:
    assert field in FIELD_VALUES, f"new request field {field!r}: add a strategy to FIELD_VALUES"
    first = {**BASE, field: data.draw(FIELD_VALUES[field], label="first")}
    second = {**BASE, field: data.draw(FIELD_VALUES[field], label="second")}
    assume(dumped(first, field) != dumped(second, field))  # values the model treats as different
    assert key_of(first) != key_of(second)


@given(name=st.text(min_size=1, max_size=12), value=json_values)
def test_unknown_extra_fields_are_part_of_the_key(name: str, value: Any) -> None:
    assume(name not in CompletionRequest.model_fields)
    assert key_of({**BASE, name: value}) != key_of(BASE)


@pytest.mark.parametrize(
    "variant",
    [
        {"stream": True},
        {"stream": True, "stream_options": {"include_usage": True}},
        {"stream": False},
        {"user": "end-user-42"},
    ],
)
def test_stream_and_user_do_not_change_the_key(variant: dict[str, Any]) -> None:
    assert key_of({**BASE, **variant}) == key_of(BASE)


def test_excluded_fields_are_exactly_stream_stream_options_and_user() -> None:
    assert EXCLUDED == ["stream", "stream_options", "user"]


def test_defaults_sent_explicitly_share_the_key_of_omitted_ones() -> None:
    explicit = {**BASE, "max_tokens": 16, "temperature": 1, "n": 1, "echo": False, "stop": None}
    assert key_of(explicit) == key_of(BASE)


@given(
    first=st.tuples(texts, texts, st.none() | texts),
    second=st.tuples(texts, texts, st.none() | texts),
)
def test_deployments_tenants_and_namespaces_never_share_a_key(
    first: tuple[str, str, str | None], second: tuple[str, str, str | None]
) -> None:
    assume(first != second)
    deployment, scope, namespace = first
    other_deployment, other_scope, other_namespace = second
    assert key_of(BASE, deployment, scope, namespace) != key_of(BASE, other_deployment, other_scope, other_namespace)


def test_the_format_version_is_part_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    before = key_of(BASE)
    monkeypatch.setattr(key, "KEY_FORMAT_VERSION", key.KEY_FORMAT_VERSION + 1)
    assert key_of(BASE) != before


def test_key_is_a_sha256_hex_digest_and_stable() -> None:
    assert key_of(BASE) == key_of(dict(BASE))
    assert len(key_of(BASE)) == 64
    int(key_of(BASE), 16)


@pytest.mark.parametrize(
    ("temperature", "nonzero_allowed", "cached"),
    [(0.0, False, True), (0.0, True, True), (0.7, True, True), (0.7, False, False), (None, False, False)],
)
def test_temperature_rule(temperature: float | None, nonzero_allowed: bool, cached: bool) -> None:
    request = CompletionRequest.model_validate({**BASE, "temperature": temperature})
    assert may_cache(request, CachePolicy(cache_nonzero_temperature=nonzero_allowed)) is cached


def test_disabled_policy_caches_nothing_and_n_best_of_are_fine() -> None:
    request = CompletionRequest.model_validate({**BASE, "temperature": 0, "n": 2, "best_of": 3})
    assert may_cache(request, CachePolicy())
    assert not may_cache(request, CachePolicy(enabled=False))


@pytest.mark.parametrize(
    ("prompt", "n", "choices"),
    [("hi", 2, 2), (["a", "b"], 3, 6), ([1, 2, 3], 1, 1), ([[1], [2]], 2, 4), (None, 1, 1)],
)
def test_expected_choices_is_n_per_prompt(prompt: Any, n: int, choices: int) -> None:
    assert expected_choices(CompletionRequest.model_validate({**BASE, "prompt": prompt, "n": n})) == choices


def test_the_credential_that_answers_is_part_of_the_partition() -> None:
    base = cache_key(deployment="instruct", scope="k", namespace=None, request=CompletionRequest.model_validate(BASE))
    assert key.credential_partition(base, None) == base  # the deployment's own credential
    virtual = {name: key.credential_partition(base, name) for name in ("vk1", "vk2", "deployment", "")}
    assert len({base, *virtual.values()}) == 5  # no virtual key's name spells another's partition, or none
    assert key.credential_partition(base, "vk1") == virtual["vk1"]  # stable


@given(st.text(max_size=8), st.text(max_size=8))
def test_two_virtual_keys_never_share_a_partition(first: str, second: str) -> None:
    assume(first != second)
    assert key.credential_partition("0" * 64, first) != key.credential_partition("0" * 64, second)
