"""Cache keys, and which requests may be cached at all.

A key is the SHA-256 of a canonical encoding (orjson, sorted keys) of a format version, the
resolved deployment, the tenant scope, the namespace and the request body. The body enters by
exclusion: every field, including ones the gateway does not know (extra fields reach upstreams, so
they may change the answer), except the few that cannot change the generated text. A field added
to `CompletionRequest` later is therefore covered without touching this module.

Which credential produces the answer is part of the partition too (`credential_partition`): the
deployment's own, or a virtual key a client names, since different credentials may mean different
accounts, models or data-use terms. An answer made with one is never served for the other.

The body is the validated model's dump, so an omitted field and the same field sent with its
default value give the same key, and ``1`` equals ``1.0`` for a float field.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from gateway.api.chat import ChatRequest
from gateway.api.embeddings import EmbeddingsRequest
from gateway.api.schemas import CompletionRequest
from policies.cache.policy import CachePolicy

KEY_FORMAT_VERSION = 1  # bump when the encoding or the meaning of a cached entry changes
EXCLUDED_FIELDS = frozenset({"stream", "stream_options", "user"})  # how, and for whom, not what
# A chat request's fields that say how it is kept and billed, not what is generated.
CHAT_EXCLUDED_FIELDS = EXCLUDED_FIELDS | {"metadata", "store", "service_tier"}
# A native Messages body's field that says for whom, not what (a Responses answer echoes its
# `metadata`: every field of that body is in its key).
NATIVE_EXCLUDED_FIELDS = frozenset({"metadata"})
DEFAULT_TEMPERATURE = 1.0


class UncacheableRequest(ValueError):
    """The body holds a value the canonical encoding cannot represent (never from JSON input)."""


AnyRequest = CompletionRequest | ChatRequest | EmbeddingsRequest
# A native request's API, its body, its headers that change the answer, and whose the answer is ("": anyone's in scope).
NativeKey = tuple[str, Mapping[str, Any], Mapping[str, str], str]


def cache_key(
    *, deployment: str, scope: str, namespace: str | None, request: AnyRequest, native: NativeKey | None = None
) -> str:
    """The hex key of `request` sent to `deployment` by tenant `scope` in `namespace`. A chat or
    embeddings request's key names its API too (its body has other fields, its answer another shape):
    an embeddings key is its input list in order and its options (model, encoding_format, dimensions).
    `native`: the body a native request sends as it came (and its headers that change the answer,
    `anthropic-beta`): the key is made of it (every field, `stream` too: a native answer is kept as
    it came, plain or streamed), since its chat view leaves out what the upstream acts on; and of
    whose the answer is, when it names that (a Responses answer's id belongs to the key that made it)."""
    material: dict[str, Any] = {
        "version": KEY_FORMAT_VERSION,
        "deployment": deployment,
        "scope": scope,
        "namespace": namespace,
    }
    if native is not None:
        api, body, headers, partition = native
        material["api"] = api
        excluded = NATIVE_EXCLUDED_FIELDS if api == "messages" else frozenset()
        material["body"] = {name: value for name, value in body.items() if name not in excluded}
        material["headers"] = dict(headers)
        if partition:
            material["partition"] = partition
    elif isinstance(request, EmbeddingsRequest):
        material["api"] = "embeddings"
        material["body"] = request.model_dump(exclude={"user"})
    elif isinstance(request, ChatRequest):
        material["api"] = "chat"
        material["body"] = request.model_dump(exclude=set(CHAT_EXCLUDED_FIELDS), by_alias=True)
    else:
        material["body"] = request.model_dump(exclude=set(EXCLUDED_FIELDS))
    try:
        encoded = orjson.dumps(material, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError as exc:
        raise UncacheableRequest(str(exc)) from exc
    return hashlib.sha256(encoded).hexdigest()


def credential_partition(key: str, virtual_key: str | None) -> str:
    """The key of the same request answered with the credential of virtual key `virtual_key`;
    None: the deployment's own credential, whose key is `key` itself. The virtual key's name is
    JSON-encoded beside a tag, so no name can spell the deployment's partition or another's."""
    if virtual_key is None:
        return key
    material = orjson.dumps(["credential", KEY_FORMAT_VERSION, key, "virtual_key", virtual_key])
    return hashlib.sha256(material).hexdigest()


def may_cache(request: AnyRequest, policy: CachePolicy) -> bool:
    """Whether the policy lets this request's answer be read from and stored in the cache.

    Sampling parameters other than temperature (n, best_of, seed, top_p) are part of the key, so
    caching them is sound; temperature > 0 is cached unless the policy opts out.
    """
    if not policy.enabled:
        return False
    if isinstance(request, EmbeddingsRequest):
        return True  # no sampling: the same input and options embed the same
    temperature = DEFAULT_TEMPERATURE if request.temperature is None else request.temperature
    return temperature == 0 or policy.cache_nonzero_temperature


def expected_choices(request: AnyRequest) -> int:
    """How many choices a complete answer has: `n` for each prompt (a chat request has one)."""
    if isinstance(request, EmbeddingsRequest):
        return len(request.inputs())  # its embeddings (never streamed: nothing assembles them)
    if isinstance(request, ChatRequest):
        return request.n or 1
    prompt = request.prompt
    prompts = len(prompt) if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int) else 1
    return (request.n or 1) * prompts
