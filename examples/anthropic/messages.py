"""The Messages API with the `anthropic` SDK: any chat deployment answers in Anthropic's shape."""

import os

from anthropic import Anthropic

client = Anthropic(
    base_url=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8080/v1").removesuffix("/v1"),  # the SDK adds /v1
    api_key=os.environ.get("GATEWAY_API_KEY", "no-keys-configured"),
)

message = client.messages.create(
    model="mock",
    max_tokens=64,
    system="You are a helpful assistant.",
    messages=[{"role": "user", "content": "Name three colours."}],
)
print(message.content[0].text)
print(f"stop_reason: {message.stop_reason}, tokens: {message.usage.input_tokens} in, {message.usage.output_tokens} out")
