"""The config examples (examples/configs/, and Claude Code's gateway.yaml) as an operator uses them.
`gateway check-config` accepts each with the variables it references set, every deployment able to
serve. Then each is served as written (only the address overridden): openai.yaml and vllm.yaml
relay to a loopback OpenAI-compatible upstream standing in for api.openai.com and a vLLM server,
local-model.yaml runs a model folder in-process, and two replicas on two-replicas-redis.yaml share
the test Redis: a key made through one's admin API works on the other, a response one stored is
read on the other. (Its shared cache is not checked here: a Redis cache write that misses its 10 ms
bound on a loaded machine is skipped by design; tests/policies/cache/test_cache_redis.py covers the sharing.)"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
from pathlib import Path

import aiohttp
import openai
import pytest

from tests.support import examples_catalog as catalog
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway_process import GATEWAY, serving

KEY = "gw-examples-key-0123456789abcdef"
CHECKED = [*catalog.CONFIGS, catalog.CLAUDE_CODE_GATEWAY]


def environment(config: Path, folder: Path, **values: str) -> dict[str, str]:
    """A value for every ${VAR} the file names: the given ones, else a stand-in of the right kind."""
    env: dict[str, str] = {}
    for variable in sorted(set(re.findall(r"\$\{(\w+)", config.read_text()))):
        if variable == "REDIS_URL":
            env[variable] = "redis://127.0.0.1:9/0"  # not reached: check-config reads the file only
        elif variable.endswith("_URL"):
            env[variable] = "http://127.0.0.1:9/v1"
        elif variable.endswith("_DIR"):
            env[variable] = str(folder)
        else:
            env[variable] = secrets.token_hex(20)  # long and random enough for an admin key
    return {**env, **values}


def name(path: Path) -> str:
    return str(path.relative_to(catalog.EXAMPLES))


@pytest.mark.parametrize("config", CHECKED, ids=name)
def test_check_config_accepts_the_example_and_every_deployment_can_serve(config: Path, tmp_path: Path) -> None:
    result = subprocess.run(  # noqa: S603 - our own console script
        [str(GATEWAY), "check-config", str(config)],
        capture_output=True,
        text=True,
        env={**os.environ, **environment(config, tmp_path)},
        timeout=120,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{config}: OK"
    deployments = [line for line in lines if line.lstrip().startswith("deployment ")]
    assert deployments
    assert all(line.endswith(", ok") for line in deployments), deployments


async def test_the_openai_config_relays_chat_and_embeddings_with_the_server_side_credential(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    config = catalog.EXAMPLES / "configs" / "openai.yaml"
    upstream_env = {"OPENAI_BASE_URL": upstream.base_url, "OPENAI_API_KEY": "sk-upstream-secret"}
    env = environment(config, tmp_path, GATEWAY_API_KEY=KEY, **upstream_env)
    async with (
        serving(config, tmp_path / "gateway.log", env) as gateway,
        openai.AsyncOpenAI(base_url=gateway.url, api_key=KEY, max_retries=0) as client,
    ):
        chat = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}]
        )
        vectors = await client.embeddings.create(model="text-embedding-3-small", input=["a", "b"])

    assert chat.choices[0].message.content == "echo: hello"
    assert len(vectors.data) == 2
    assert [(r.path, r.body["model"]) for r in upstream.received] == [
        ("/v1/chat/completions", "gpt-4o-mini"),
        ("/v1/embeddings", "text-embedding-3-small"),
    ]
    assert {r.headers["Authorization"] for r in upstream.received} == {"Bearer sk-upstream-secret"}


async def test_the_vllm_config_serves_the_alias_with_the_server_s_model_name(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    config = catalog.EXAMPLES / "configs" / "vllm.yaml"
    upstream_env = {"VLLM_BASE_URL": upstream.base_url, "VLLM_MODEL": "my-org/my-model"}
    env = environment(config, tmp_path, GATEWAY_API_KEY=KEY, **upstream_env)
    async with (
        serving(config, tmp_path / "gateway.log", env) as gateway,
        openai.AsyncOpenAI(base_url=gateway.url, api_key=KEY, max_retries=0) as client,
    ):
        chat = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}]
        )
        completion = await client.completions.create(model="qwen", prompt="Once upon", max_tokens=5)

    assert chat.choices[0].message.content == "echo: hello"
    assert completion.choices[0].text
    assert [(r.path, r.body["model"]) for r in upstream.received] == [
        ("/v1/chat/completions", "my-org/my-model"),
        ("/v1/completions", "my-org/my-model"),
    ]


async def test_the_local_model_config_runs_a_model_folder_in_process(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tests.support.local_model import SCRIPTED_TEXT, scripted_chat_model_dir

    config = catalog.EXAMPLES / "configs" / "local-model.yaml"
    env = environment(config, tmp_path, LOCAL_MODEL_DIR=str(scripted_chat_model_dir()), GATEWAY_API_KEY=KEY)
    async with (
        serving(config, tmp_path / "gateway.log", env) as gateway,
        openai.AsyncOpenAI(base_url=gateway.url, api_key=KEY, max_retries=0) as client,
    ):
        chat = await client.chat.completions.create(
            model="local", messages=[{"role": "user", "content": "hi"}], max_tokens=8
        )

    assert chat.choices[0].message.content == SCRIPTED_TEXT  # the folder's model answered


async def test_two_replicas_on_redis_share_keys_and_stored_responses(
    tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    config = catalog.EXAMPLES / "configs" / "two-replicas-redis.yaml"
    env = environment(config, tmp_path, REDIS_URL=redis_url, GATEWAY_REDIS_PREFIX=redis_prefix)
    admin = {"Authorization": f"Bearer {env['GATEWAY_ADMIN_KEY']}"}
    one_worker = ["--workers", "1"]  # per replica: the file's two would only load the test machine
    async with (
        serving(config, tmp_path / "a.log", env, one_worker) as replica_a,
        serving(config, tmp_path / "b.log", env, one_worker) as replica_b,
        aiohttp.ClientSession() as http,
    ):
        async with http.post(f"{replica_a.root}/admin/keys", headers=admin, json={"name": "my-app"}) as made:
            assert made.status == 201, await made.text()
            key = (await made.json())["key"]
        async with (
            openai.AsyncOpenAI(base_url=replica_a.url, api_key=key, max_retries=0) as on_a,
            openai.AsyncOpenAI(base_url=replica_b.url, api_key=key, max_retries=0) as on_b,
        ):
            stored = await on_b.responses.create(model="mock", input="Suggest a name for a cat.")
            read = await on_a.responses.retrieve(stored.id)

    assert read.output_text == stored.output_text != ""  # a key made on A, used on B; B's response read on A
