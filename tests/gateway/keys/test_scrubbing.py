"""The scrubber on its own: what counts as a leak, what it keeps, and the credentials it knows."""

from __future__ import annotations

import orjson
import pytest
import yaml

from gateway.api.errors import UpstreamRejected
from gateway.config.loader import parse_config
from gateway.keys.known_secrets import KnownSecrets, ScrubbingKeyDirectory, config_secrets
from providers.upstream.errors import redirect_origin, upstream_status_error
from providers.upstream.scrubbing import REQUEST_SECRETS, LearntSecrets, Secrets, SecretSet, scrub_text

SECRET = "Zq7abc1DEF2ghi3JKL4mno5PQR6stu7VWX8yz9xyz"  # not shaped like a key: found as a known secret


def scrub(text: str, *secrets: str) -> str:
    return scrub_text(text, [SecretSet.of(secrets or (SECRET,))])


@pytest.mark.parametrize(
    "echo",
    [
        SECRET,
        SECRET[9:17],  # any 8 characters in a row
        SECRET[5:30],
        SECRET.lower(),
        SECRET.upper(),
        f"{SECRET[:4]}****{SECRET[-4:]}",
        f"{SECRET[:7]}{'*' * 20}…{SECRET[-4:]}",
        f"{SECRET[:6]}...",
        f"****{SECRET[-4:]}",
        f"…{SECRET[-6:]}",
    ],
)
def test_a_credential_whole_in_part_or_masked_is_redacted(echo: str) -> None:
    scrubbed = scrub(f"Incorrect API key provided: {echo}. Check it.")

    assert scrubbed.startswith("Incorrect API key provided: [redacted]")
    assert scrubbed.endswith(" Check it.")


@pytest.mark.parametrize(
    "text",
    [
        "The model is overloaded. Try again.",
        "invalid_api_key",
        "key_expired",
        "api_key_invalid",
        f"a fragment of 7: {SECRET[9:16]}",
    ],
)
def test_ordinary_text_and_error_codes_are_kept(text: str) -> None:
    assert scrub(text) == text


def test_overlapping_matches_become_one_marker() -> None:
    other = "tok-9f8e7d6c5b4a39281706"

    assert scrub(f"{SECRET}{other} and {SECRET}", SECRET, other) == "[redacted] and [redacted]"


def test_every_field_of_an_upstream_4xx_is_scrubbed_and_cut_only_afterwards() -> None:
    fields = {"message": f"bad key {SECRET}", "type": SECRET, "param": f"{SECRET[:4]}****", "code": SECRET[3:20]}
    headers = {"retry-after": "7", "retry-after-ms": SECRET}

    error = upstream_status_error(400, orjson.dumps({"error": fields}), headers, deployment="d", secrets=[SECRET])

    assert isinstance(error, UpstreamRejected)
    assert error.envelope()["error"] == {
        "message": "bad key [redacted]",
        "type": "[redacted]",
        "param": "[redacted]",
        "code": "[redacted]",
    }
    assert error.headers == {"retry-after": "7"}  # a Retry-After that is no number nor date is not relayed


def test_a_credential_straddling_the_cut_of_a_text_body_leaves_no_fragment() -> None:
    raw = b"e" * 290 + SECRET.encode() + b" more text"

    error = upstream_status_error(500, raw, {}, deployment="d", secrets=[SECRET])

    assert SECRET[:8] not in error.message
    assert error.message.endswith("e[redacted]…")


@pytest.mark.parametrize(
    ("location", "origin"),
    [
        ("https://user:pw@evil.example/path?key=1#x", "https://evil.example:443"),
        ("http://127.0.0.1:9000/steal", "http://127.0.0.1:9000"),
        ("/elsewhere?key=secret", "https://api.example.com:8443"),
        ("http://[::1]:81/", "http://[::1]:81"),
        ("http://", "an unparsable URL"),
    ],
)
def test_a_redirect_is_named_by_its_origin_only(location: str, origin: str) -> None:
    assert redirect_origin(location, "https://api.example.com:8443/v1/completions") == origin


def test_every_credential_of_a_config_is_known() -> None:
    config = {
        "redis": {"url": "redis://:redis-password-1234@127.0.0.1:6379/0"},
        "admin": {"key": "${ADMIN}"},
        "keys": [{"name": "team", "key": "${CALLER}"}],
        "virtual_keys": [{"name": "vk", "provider": "openai", "api_key": "${VIRTUAL}"}],
        "deployments": [
            {
                "name": "d",
                "provider": {
                    "type": "openai",
                    "base_url": "http://127.0.0.1:1/v1",
                    "api_key": "${DEPLOYMENT}",
                    "headers": {"X-Custom-Token": "header-token-5678", "X-Title": "my-application"},
                },
            }
        ],
        "observability": {"metrics": {"key": "${METRICS}"}},
    }
    env = {n: f"{n.lower()}-value-0123456789" for n in ("ADMIN", "CALLER", "VIRTUAL", "DEPLOYMENT", "METRICS")}
    secrets = config_secrets(parse_config(yaml.safe_dump(config), env))

    for secret in [*env.values(), "redis-password-1234", "header-token-5678"]:
        assert scrub_text(f"x {secret} y", [secrets]) == "x [redacted] y"
    assert scrub_text("my-application", [secrets]) == "my-application"  # not a credential's header


async def test_the_callers_key_and_learnt_credentials_are_scrubbed_for_the_rest_of_the_request() -> None:
    caller = "gw-only-known-by-its-hash-0123456789"
    learnt = LearntSecrets()
    loaded = parse_config(yaml.safe_dump({"deployments": []}), {})
    keys = ScrubbingKeyDirectory([], None, required=False, secrets=KnownSecrets(loaded, learnt))
    provider = Secrets("own-credential-0123456789")

    token = REQUEST_SECRETS.set(None)
    try:
        await keys.authenticate({"authorization": f"Bearer {caller}"})
        learnt.add("held-in-the-store-0123456789")

        text = provider.scrub(f"{caller} own-credential-0123456789 held-in-the-store-0123456789")
    finally:
        REQUEST_SECRETS.reset(token)

    assert text == "[redacted] [redacted] [redacted]"
